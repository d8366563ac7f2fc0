// Package capdrop removes from an OCI runtime spec the capabilities that the machine cannot
// grant. Some VMs run containers with a capability bounding set that lacks CAP_SYS_RESOURCE;
// runc then fails every `docker run --privileged` (and every kind node, which is privileged)
// with "unable to apply caps: operation not permitted", because a privileged spec asks for
// every capability the kernel knows. Dropping what the bounding set lacks asks for no more
// than the kernel will give, and changes nothing on a machine that has every capability.
package capdrop

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// capNames are the capabilities by bit number (linux/capability.h, up to CAP_CHECKPOINT_RESTORE).
var capNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK",
	"CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
	"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
	"CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
	"CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
	"CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
}

// Missing returns the names of the capabilities that the bounding set capBnd (the hex mask
// of /proc/self/status's CapBnd line) lacks, among those this package knows.
func Missing(capBnd uint64) []string {
	var out []string
	for bit, name := range capNames {
		if capBnd&(1<<uint(bit)) == 0 {
			out = append(out, name)
		}
	}
	return out
}

// BoundingSet reads the calling process's capability bounding set from a /proc/<pid>/status
// file's text.
func BoundingSet(status []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapBnd:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return 0, fmt.Errorf("parse CapBnd %q: %w", v, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("no CapBnd line in status")
}

// capSets are the fields of an OCI process's "capabilities" object.
var capSets = []string{"bounding", "effective", "inheritable", "permitted", "ambient"}

// FilterProcess removes drop from every capability set of an OCI process object (the
// "process" member of config.json, or the whole file that `runc exec --process` reads).
// It reports whether anything changed; fields it does not know are kept as they were.
func FilterProcess(proc map[string]any, drop map[string]bool) bool {
	caps, ok := proc["capabilities"].(map[string]any)
	if !ok {
		return false
	}
	changed := false
	for _, set := range capSets {
		list, ok := caps[set].([]any)
		if !ok {
			continue
		}
		kept := list[:0:0]
		for _, c := range list {
			if s, ok := c.(string); ok && drop[s] {
				changed = true
				continue
			}
			kept = append(kept, c)
		}
		caps[set] = kept
	}
	return changed
}

// RewriteFile applies FilterProcess to the OCI file at path: a bundle's config.json when
// spec is true (the process is its "process" member), a process file otherwise. Numbers
// keep their exact text, so uids, limits and device numbers survive the round trip. The file
// is rewritten in place only when something changed.
func RewriteFile(path string, spec bool, drop map[string]bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	proc := doc
	if spec {
		p, ok := doc["process"].(map[string]any)
		if !ok {
			return nil // no process: nothing to run, nothing to filter
		}
		proc = p
	}
	if !FilterProcess(proc, drop) {
		return nil
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if err := os.WriteFile(path, out, info.Mode().Perm()); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Target is the file a runc command line asks the runtime to read a process from.
type Target struct {
	// Path is the file; empty when the command reads none (every command but create, run
	// and exec --process).
	Path string
	// Spec is true for a bundle's config.json, false for an exec process file.
	Spec bool
}

// runc's global flags that take a value (runc --help), so that the command is found after them.
var globalWithValue = map[string]bool{
	"--log": true, "--log-format": true, "--root": true, "--criu": true, "--rootless": true,
}

// Parse finds the command in runc's arguments (without argv[0]) and the file it will read:
// create and run read <bundle>/config.json (--bundle/-b, default the working directory cwd),
// exec reads its --process/-p file when it has one.
func Parse(args []string, cwd string) Target {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		f := args[i]
		i++
		if !strings.Contains(f, "=") && globalWithValue[f] && i < len(args) {
			i++
		}
	}
	if i >= len(args) {
		return Target{}
	}
	cmd, rest := args[i], args[i+1:]
	switch cmd {
	case "create", "run":
		bundle := cwd
		if v, ok := flagValue(rest, "--bundle", "-b"); ok {
			bundle = v
		}
		return Target{Path: bundle + "/config.json", Spec: true}
	case "exec":
		if v, ok := flagValue(rest, "--process", "-p"); ok {
			return Target{Path: v}
		}
	}
	return Target{}
}

// flagValue returns the value of a flag given as "--long V", "--long=V", "-s V" or "-s=V".
func flagValue(args []string, long, short string) (string, bool) {
	for i, a := range args {
		if a == "--" {
			break
		}
		for _, name := range []string{long, short} {
			if a == name && i+1 < len(args) {
				return args[i+1], true
			}
			if v, ok := strings.CutPrefix(a, name+"="); ok {
				return v, true
			}
		}
	}
	return "", false
}
