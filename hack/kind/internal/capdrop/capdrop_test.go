package capdrop

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestMissingAndBoundingSet(t *testing.T) {
	// This VM's CapBnd: every capability up to CAP_CHECKPOINT_RESTORE but CAP_SYS_RESOURCE (24).
	bnd, err := BoundingSet([]byte("Name:\tx\nCapInh:\t0000000000000000\nCapBnd:\t000001fffeffffff\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := Missing(bnd); !reflect.DeepEqual(got, []string{"CAP_SYS_RESOURCE"}) {
		t.Fatalf("Missing = %v, want [CAP_SYS_RESOURCE]", got)
	}
	if got := Missing(1<<uint(len(capNames)) - 1); len(got) != 0 {
		t.Fatalf("full set: Missing = %v, want none", got)
	}
	if _, err := BoundingSet([]byte("CapBnd:\tzz\n")); err == nil {
		t.Fatal("bad hex: want an error")
	}
	if _, err := BoundingSet([]byte("Name:\tx\n")); err == nil {
		t.Fatal("no CapBnd line: want an error")
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want Target
	}{
		{[]string{"create", "--bundle", "/b", "id"}, Target{Path: "/b/config.json", Spec: true}},
		{[]string{"--root", "/run/runc", "--log", "/l", "create", "-b=/b2", "id"}, Target{Path: "/b2/config.json", Spec: true}},
		{[]string{"--systemd-cgroup", "run", "id"}, Target{Path: "/cwd/config.json", Spec: true}},
		{[]string{"exec", "--process", "/p.json", "id"}, Target{Path: "/p.json"}},
		{[]string{"--root=/r", "exec", "-p", "/q.json", "id"}, Target{Path: "/q.json"}},
		{[]string{"exec", "id", "sh"}, Target{}},
		{[]string{"exec", "id", "--", "-p", "/not-a-flag"}, Target{}},
		{[]string{"start", "id"}, Target{}},
		{[]string{"--version"}, Target{}},
		{nil, Target{}},
	} {
		if got := Parse(tc.args, "/cwd"); got != tc.want {
			t.Errorf("Parse(%q) = %+v, want %+v", tc.args, got, tc.want)
		}
	}
}

func TestRewriteFile(t *testing.T) {
	drop := map[string]bool{"CAP_SYS_RESOURCE": true}
	dir := t.TempDir()
	spec := filepath.Join(dir, "config.json")
	// A uid beyond float64's exact range must survive the round trip, as must unknown fields.
	in := `{"ociVersion":"1.0.2","process":{"user":{"uid":9007199254740993},"capabilities":{` +
		`"bounding":["CAP_CHOWN","CAP_SYS_RESOURCE"],"effective":["CAP_SYS_RESOURCE"],"permitted":["CAP_KILL"]}},"x-unknown":{"k":1}}`
	if err := os.WriteFile(spec, []byte(in), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := RewriteFile(spec, true, drop); err != nil {
		t.Fatal(err)
	}
	out, _ := os.ReadFile(spec)
	got := string(out)
	for _, want := range []string{`"bounding":["CAP_CHOWN"]`, `"effective":[]`, `"permitted":["CAP_KILL"]`, `9007199254740993`, `"x-unknown":{"k":1}`} {
		if !strings.Contains(got, want) {
			t.Errorf("rewritten spec %s lacks %s", got, want)
		}
	}
	if info, _ := os.Stat(spec); info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600 kept", info.Mode().Perm())
	}

	// An exec process file is the process object itself; unchanged files are not rewritten.
	proc := filepath.Join(dir, "process.json")
	const plain = `{"args":["sh"],"capabilities":{"bounding":["CAP_KILL"]}}`
	if err := os.WriteFile(proc, []byte(plain), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := RewriteFile(proc, false, drop); err != nil {
		t.Fatal(err)
	}
	if out, _ := os.ReadFile(proc); string(out) != plain {
		t.Errorf("unchanged process file rewritten: %s", out)
	}
	if err := RewriteFile(filepath.Join(dir, "none.json"), true, drop); err == nil {
		t.Error("missing file: want an error")
	}
}
