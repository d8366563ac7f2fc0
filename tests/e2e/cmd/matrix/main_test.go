package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestFlags: every subcommand takes the common flags and its own, which land in the
// options; the defaults are the documented ones.
func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want options
	}{
		{[]string{"run", "--only=a,b", "--results=r.json"}, options{Cells: "matrix/cells.json", Results: "r.json", Upgrades: "matrix/upgrade.json", Only: "a,b"}},
		{[]string{"--doc=d.md", "doc"}, options{Cells: "matrix/cells.json", Results: "matrix/results.json", Doc: "d.md", Upgrades: "matrix/upgrade.json"}},
		{[]string{"which", "--kubeconfig", "k", "--namespace=ns"}, options{Cells: "matrix/cells.json", Results: "matrix/results.json", Upgrades: "matrix/upgrade.json", Kubeconfig: "k", Namespace: "ns"}},
		{[]string{"upgrade", "--keep-plugins", "--upgrades=u.json"}, options{Cells: "matrix/cells.json", Results: "matrix/results.json", Upgrades: "u.json", KeepPlugins: true}},
	} {
		var o options
		root := newCommand(&o, &bytes.Buffer{}, &bytes.Buffer{})
		cmd, rest, err := root.Find(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if tc.want.Namespace == "" {
			tc.want.Namespace = "fakecloud-csi" // defaults are set when the flags are defined
		}
		if o != tc.want {
			t.Errorf("%q: options %+v, want %+v", tc.args, o, tc.want)
		}
	}
}

// TestRefused: no subcommand, an unknown one, a flag of another subcommand, a bad value and
// which without --kubeconfig fail before anything runs, with a message saying what to do;
// main exits 1 on any error. Help succeeds and lists the subcommands.
func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage: matrix run|doc|which|upgrade|check [flags]"},
		{[]string{"walk"}, `unknown command "walk" for "matrix"`},
		{[]string{"doc", "--only=a"}, "unknown flag: --only (matrix doc --help lists the flags)"},
		{[]string{"upgrade", "--keep-plugins=maybe"}, `invalid argument "maybe" for "--keep-plugins" flag`},
		{[]string{"which"}, "which: --kubeconfig is required"},
		{[]string{"doc", "--cells="}, "--cells must not be empty"},
	} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), tc.args, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), tc.want) || out.Len() > 0 {
			t.Errorf("%q: %v, stdout %q; want an error containing %q", tc.args, err, out.String(), tc.want)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\n  run ", "\n  doc ", "\n  which ", "\n  upgrade ", "--cells string"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, out.String())
		}
	}
}
