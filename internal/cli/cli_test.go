package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// newTestRoot is a root "prog" with a --count flag and one subcommand "sub" that prints "ran".
func newTestRoot(stdout, stderr *bytes.Buffer, opts ...Option) *cobra.Command {
	root := NewRoot(&cobra.Command{
		Use:   "prog",
		Short: "a test program",
		Args:  cobra.NoArgs,
		RunE:  NeedSubcommand(stderr, "usage: prog sub [flags]"),
	}, stdout, stderr, opts...)
	root.PersistentFlags().Int("count", 1, "how many")
	root.AddCommand(&cobra.Command{Use: "sub", Short: "the subcommand", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write([]byte("ran\n"))
			return err
		}})
	return root
}

func TestNewRoot(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		opts       []Option
		wantErr    string // "" for none; else the exact error text
		wantStdout string // a substring; "" for empty stdout
		wantStderr string // a substring; "" for empty stderr
	}{
		{name: "unknown flag gets the hint", args: []string{"sub", "--nope"},
			wantErr: "unknown flag: --nope (prog sub --help lists the flags)"},
		{name: "malformed flag gets the hint", args: []string{"--count=x"},
			wantErr: `invalid argument "x" for "--count" flag: strconv.ParseInt: parsing "x": invalid syntax (prog --help lists the flags)`},
		{name: "without the hint pflag's error stands", args: []string{"--nope"}, opts: []Option{WithoutFlagHint()},
			wantErr: "unknown flag: --nope"},
		{name: "help goes to stdout", args: []string{"--help"}, wantStdout: "Available Commands:\n  help        Help about any command\n  sub "},
		{name: "subcommand output goes to stdout", args: []string{"sub"}, wantStdout: "ran\n"},
		{name: "no completion command", args: []string{"completion", "bash"},
			wantErr: `unknown command "completion" for "prog"`},
		{name: "completion kept on request", args: []string{"completion", "bash"}, opts: []Option{WithCompletion()},
			wantStdout: "# bash completion V2 for prog"},
		{name: "no subcommand: usage on stderr and the error", args: []string{},
			wantErr: "usage: prog sub [flags]", wantStderr: "Usage:\n  prog [flags]\n  prog [command]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := Execute(context.Background(), newTestRoot(&stdout, &stderr, tc.opts...), tc.args)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error %q, want none", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			for _, s := range []struct {
				name      string
				got, want string
			}{{"stdout", stdout.String(), tc.wantStdout}, {"stderr", stderr.String(), tc.wantStderr}} {
				if s.want == "" && s.got != "" || !strings.Contains(s.got, s.want) {
					t.Errorf("%s = %q, want it to contain %q", s.name, s.got, s.want)
				}
			}
		})
	}
}

// TestNewRootHelpListsNoCompletion: the help of a root with subcommands names no completion
// command unless WithCompletion.
func TestNewRootHelpListsNoCompletion(t *testing.T) {
	for _, tc := range []struct {
		opts []Option
		want bool
	}{{nil, false}, {[]Option{WithCompletion()}, true}} {
		var stdout, stderr bytes.Buffer
		if err := Execute(context.Background(), newTestRoot(&stdout, &stderr, tc.opts...), []string{"--help"}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(stdout.String(), "completion"); got != tc.want {
			t.Errorf("opts %d: help names completion = %v, want %v:\n%s", len(tc.opts), got, tc.want, stdout.String())
		}
	}
}
