package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// events is go test -json of two packages (as gotestsum --jsonfile writes it): p1 with a pass, a skip (with its reason), a
// subtest skipped for another reason and a failure; p2 without test files.
const events = `{"Action":"start","Package":"p1"}
{"Action":"run","Package":"p1","Test":"TestA"}
{"Action":"output","Package":"p1","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"p1","Test":"TestA","Output":"noise of a passing test\n"}
{"Action":"pass","Package":"p1","Test":"TestA"}
{"Action":"run","Package":"p1","Test":"TestMount"}
{"Action":"output","Package":"p1","Test":"TestMount","Output":"    mount_test.go:12: real bind mounts need root (CAP_SYS_ADMIN)\n"}
{"Action":"output","Package":"p1","Test":"TestMount","Output":"--- SKIP: TestMount (0.00s)\n"}
{"Action":"skip","Package":"p1","Test":"TestMount"}
{"Action":"run","Package":"p1","Test":"TestT/sub"}
{"Action":"output","Package":"p1","Test":"TestT/sub","Output":"    t_test.go:3: real bind mounts need root (CAP_SYS_ADMIN)\n"}
{"Action":"skip","Package":"p1","Test":"TestT/sub"}
{"Action":"run","Package":"p1","Test":"TestLoop"}
{"Action":"output","Package":"p1","Test":"TestLoop","Output":"    loop_test.go:7: no /dev/loop-control\n"}
{"Action":"skip","Package":"p1","Test":"TestLoop"}
{"Action":"run","Package":"p1","Test":"TestB"}
{"Action":"output","Package":"p1","Test":"TestB","Output":"    b_test.go:9: got 2, want 3\n"}
{"Action":"output","Package":"p1","Test":"TestB","Output":"--- FAIL: TestB (0.00s)\n"}
{"Action":"fail","Package":"p1","Test":"TestB"}
{"Action":"output","Package":"p1","Output":"FAIL\n"}
{"Action":"output","Package":"p1","Output":"FAIL\tp1\t0.01s\n"}
{"Action":"fail","Package":"p1"}
{"Action":"output","Package":"p2","Output":"?   \tp2\t[no test files]\n"}
{"Action":"skip","Package":"p2"}
not json: a vet message
`

func TestAdd(t *testing.T) {
	s := Summary{SkipReasons: map[string]int{}}
	if err := s.add(strings.NewReader(events)); err != nil {
		t.Fatal(err)
	}
	if s.Packages != 2 || s.NoTests != 1 || s.FailedPackages != 1 || s.Passed != 1 || s.Failed != 1 || s.Skipped != 3 ||
		len(s.SkipReasons) != 2 || s.SkipReasons["real bind mounts need root (CAP_SYS_ADMIN)"] != 2 || s.SkipReasons["no /dev/loop-control"] != 1 {
		t.Fatalf("summary %+v", s)
	}
	line := s.line("unit")
	for _, w := range []string{"unit: FAILED", "2 packages (1 without tests)", "1 test passed, 1 failed, 3 skipped",
		"(2× real bind mounts need root (CAP_SYS_ADMIN); 1× no /dev/loop-control)"} {
		if !strings.Contains(line, w) {
			t.Errorf("line %q lacks %q", line, w)
		}
	}
}

// TestRun: run adds the files up into one line labelled by their names, and fails when a test
// failed; a passing set passes.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a.json", events)
	b := write("b.json", `{"Action":"run","Package":"p3","Test":"TestC"}
{"Action":"pass","Package":"p3","Test":"TestC"}
{"Action":"pass","Package":"p3"}
`)
	var out bytes.Buffer
	if err := run([]string{b}, &out); err != nil {
		t.Fatalf("run of a passing run: %v", err)
	}
	if got, want := out.String(), "== all go tests (b): ok: 1 package (0 without tests), 1 test passed, 0 failed, 0 skipped\n"; got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
	out.Reset()
	if err := run([]string{"-also=csi-sanity", a, b}, &out); err == nil {
		t.Fatal("run passed runs with a failed test")
	}
	if got, want := out.String(), "== all go tests (a; b): FAILED: 3 packages (1 without tests), 2 tests passed, 1 failed, 3 skipped"; !strings.HasPrefix(got, want) ||
		!strings.HasSuffix(got, "; also passed: csi-sanity\n") {
		t.Fatalf("total %q, want prefix %q", got, want)
	}
	if err := run(nil, &out); err == nil {
		t.Fatal("run without files passed")
	}
}
