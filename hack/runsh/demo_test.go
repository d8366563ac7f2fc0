package runsh

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDemoSaysTheSlotsItShows: make run's demo announced "2 more slots taken out of band"
// and then showed {"outOfBandSlots": 3} (the seed's boot disk is the third), so the message
// and the figure disagreed (issue 26's newcomer trial). The heading now gives the figure the
// PATCH sets, says what the boot disk is, once, and docs/run.md quotes it as printed.
func TestDemoSaysTheSlotsItShows(t *testing.T) {
	script := demoScript(t)
	patch := regexp.MustCompile(`-d '\{"outOfBandSlots": ([0-9]+)\}' "\$CLOUD/v1/instances/\$n1"`).FindStringSubmatch(script)
	if patch == nil {
		t.Fatal("no demo PATCH of outOfBandSlots on $n1 found")
	}
	heading := regexp.MustCompile(`echo "(== Demo: [^"]*)"`).FindStringSubmatch(script)
	if heading == nil {
		t.Fatal("no \"== Demo:\" heading found")
	}
	h := heading[1]
	if want := "with " + patch[1] + " slots taken out of band"; !strings.Contains(h, want) {
		t.Errorf("demo heading %q does not say %q, the outOfBandSlots its PATCH sets", h, want)
	}
	if strings.Count(script, "boot disk") != 1 || !strings.Contains(h, "boot disk") {
		t.Errorf("the demo should name the boot disk once, in its heading %q", h)
	}
	doc, err := os.ReadFile("../../docs/run.md")
	if err != nil {
		t.Fatal(err)
	}
	if quoted := strings.ReplaceAll(h, "$n1", "node-a2"); !strings.Contains(string(doc), quoted+"\n") {
		t.Errorf("docs/run.md does not quote the demo heading as make run prints it: %q", quoted)
	}
}

// demoScript is the text of the script that holds the demo (hack/run.sh, or a file under
// hack/lib it moved to).
func demoScript(t *testing.T) string {
	t.Helper()
	files, _ := filepath.Glob("../lib/*.sh")
	for _, f := range append([]string{"../run.sh"}, files...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "== Demo:") {
			return string(b)
		}
	}
	t.Fatal("no script under hack/ holds the demo (\"== Demo:\")")
	return ""
}
