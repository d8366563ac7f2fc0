// Package cli is the cobra root command set-up the project's programs share, so that every
// program a user runs (the shipped driver and fakecloud, the e2e, bench and kind tools) fails,
// prints help and reports a bad flag the same way.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Option changes one of the house's settings that NewRoot applies.
type Option func(*settings)

type settings struct {
	completion bool
	flagHint   bool
}

// WithCompletion keeps cobra's `completion bash|zsh|fish|powershell` subcommand, for the
// shipped binaries whose docs name it; without it a root with subcommands has none.
func WithCompletion() Option { return func(s *settings) { s.completion = true } }

// WithoutFlagHint leaves pflag's error for an unknown or malformed flag as it is, without
// the "(PATH --help lists the flags)" hint, for the programs that never printed it.
func WithoutFlagHint() Option { return func(s *settings) { s.flagHint = false } }

// NewRoot applies the house's settings to root and returns it: cobra prints neither errors nor
// usage on failure (the program's main prints the error once: SilenceErrors, SilenceUsage);
// help and usage go to stdout and cobra's own messages to stderr; a root with subcommands
// gets no `completion` subcommand; and the error of an unknown or malformed flag ends with
// "(PATH --help lists the flags)", PATH the command's path such as "matrix run". It does no I/O.
func NewRoot(root *cobra.Command, stdout, stderr io.Writer, opts ...Option) *cobra.Command {
	s := settings{flagHint: true}
	for _, o := range opts {
		o(&s)
	}
	root.SilenceUsage = true
	root.SilenceErrors = true
	root.CompletionOptions.DisableDefaultCmd = !s.completion
	root.SetOut(stdout)
	root.SetErr(stderr)
	if s.flagHint {
		root.SetFlagErrorFunc(flagHint)
	}
	return root
}

// flagHint adds to a flag parsing error where the flags are listed.
func flagHint(cmd *cobra.Command, err error) error {
	return fmt.Errorf("%w (%s --help lists the flags)", err, cmd.CommandPath())
}

// NeedSubcommand is the RunE of a root whose work is all in its subcommands: run without one,
// it prints the root's usage to stderr and fails with the error msg (e.g. "usage: matrix
// run|doc [flags]"), so that a bare invocation shows what to type and exits non-zero.
func NeedSubcommand(stderr io.Writer, msg string) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		cmd.SetOut(stderr)
		_ = cmd.Usage() // best effort: the error below says the same in one line
		return errors.New(msg)
	}
}

// Execute parses args (without the program name) with root and runs the command they name
// under ctx; its error is the command's, for main to print and exit 1 on.
func Execute(ctx context.Context, root *cobra.Command, args []string) error {
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}
