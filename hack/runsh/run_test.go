// Package runsh tests hack/run.sh (make run) with stand-in binaries: what it checks before it
// builds or starts anything, and what it prints and leaves when a start fails.
package runsh

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeBin writes stand-ins for bin/fakecloud and bin/driver: `fakecloud seed instances`
// prints three nodes; started as a server, the fake cloud prints line and exits 1.
func fakeBin(t *testing.T, line string) string {
	t.Helper()
	dir := t.TempDir()
	fc := "#!/bin/sh\nif [ \"$1\" = seed ]; then printf 'node-a1\\nnode-a2\\nnode-b1\\n'; exit 0; fi\necho '" + line + "' >&2\nexit 1\n"
	for name, body := range map[string]string{"fakecloud": fc, "driver": "#!/bin/sh\nsleep 30\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// listen takes a free port on 127.0.0.1 for the test's life.
func listen(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// freePort is a port nothing listens on (just closed).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return p
}

func TestRunScriptFailsEarlyAndClearly(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash: hack/run.sh needs it")
	}
	busyCloud, busyDriver := listen(t), listen(t)
	tests := []struct {
		name    string
		env     []string
		want    []string
		notWant []string
	}{
		{"a port that is not a number", []string{"FAKECLOUD_PORT=abc"},
			[]string{"FAKECLOUD_PORT=abc: want a port number from 1 to 65535"}, []string{"BUILT"}},
		{"a port base out of range", []string{"DRIVER_HTTP_PORT_BASE=70000"},
			[]string{"DRIVER_HTTP_PORT_BASE=70000: want a port number from 1 to 65535"}, []string{"BUILT"}},
		{"a port base whose node plugins would pass 65535", []string{"DRIVER_HTTP_PORT_BASE=65534"},
			[]string{"DRIVER_HTTP_PORT_BASE=65534: the controller and 3 node plugins need ports 65534-65537, past 65535"}, nil},
		{"ports in use: all named before the build, with what to do", []string{"FAKECLOUD_PORT=" + strconv.Itoa(busyCloud), "DRIVER_HTTP_PORT_BASE=" + strconv.Itoa(busyDriver)},
			[]string{"ports " + strconv.Itoa(busyCloud) + " " + strconv.Itoa(busyDriver) + " in use", "another make run may be running (Ctrl-C it), or set FAKECLOUD_PORT and DRIVER_HTTP_PORT_BASE"},
			[]string{"BUILT"}},
		{"the fake cloud exits at start: its log only, the folder removed", []string{"FAKECLOUD_PORT=" + strconv.Itoa(freePort(t)), "DRIVER_HTTP_PORT_BASE=" + strconv.Itoa(freePort(t))},
			[]string{"BUILT", "run.sh failed: fake cloud exited; the end of its log", "listen tcp: lookup tcp/abc: unknown port", "(start-up failed: removed "},
			[]string{"controller.log", "==> "}},
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmp := t.TempDir()
			cmd := exec.Command("bash", filepath.Join(root, "hack/run.sh"))
			cmd.Env = append(os.Environ(), append([]string{"BIN=" + fakeBin(t, "listen tcp: lookup tcp/abc: unknown port"),
				"TMPDIR=" + tmp, "BUILD=echo BUILT", "RUN_DIR=", "DEMO=0", "FOLLOW=0"}, tt.env...)...)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("hack/run.sh succeeded, want a failure:\n%s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(string(out), w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
			left, _ := filepath.Glob(filepath.Join(tmp, "fakecloud-csi-run.*"))
			if len(left) > 0 {
				t.Errorf("a failed start left %v", left)
			}
		})
	}
}
