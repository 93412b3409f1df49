package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/steplab/steplab/internal/jobs"
)

// subcommands registers constructors from the files of this package, one
// file per subcommand, so that adding a command touches one file.
var subcommands []func() *cobra.Command

func register(f func() *cobra.Command) { subcommands = append(subcommands, f) }

func newRootCmd() *cobra.Command {
	var verbose, quiet bool
	root := &cobra.Command{
		Use:   "steplab",
		Short: "A testbed for LLM-serving step timings",
		Long: `steplab stores captured traces of an inference engine (scheduler outputs,
payload sizes, timings) as Parquet datasets, simulates a vLLM-style scheduler
deterministically, fits forward-pass models (FPM) and replays traces against them.

A dataset is a directory: manifest.json plus one Parquet table per name
(steps, step_requests, requests, gpu_samples, engine_samples). Any Parquet
tool reads it.

Start here:
  steplab import azure embedded:azure-conv-2023 -o out/ds   # bring a trace in
  steplab inspect out/ds                                     # what is in it
  steplab validate out/ds                                    # is it consistent
  steplab export out/ds --format csv -o out/ds-csv               # hand it to a spreadsheet or pandas`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, args []string) {
			markWatchesCancel(cmd)
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			if quiet {
				level = slog.LevelWarn
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level})))
			jobs.ClampProcs()
		},
	}
	root.PersistentFlags().BoolVarP(&verbose, "verbose", "v", false, "log debug detail to stderr")
	root.PersistentFlags().BoolVarP(&quiet, "quiet", "q", false, "log only warnings and errors")
	for _, f := range subcommands {
		root.AddCommand(f())
	}
	return root
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// exitError carries an exit code (1: a check failed; 2: usage or input error).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// writeJSON prints v as indented JSON, the --json output of every command.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// isTerminal reports whether w is a terminal; the contract test replaces
// it to see the progress a person at a terminal would.
var isTerminal = func(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// newProgress returns a progress bar on cmd's stderr, drawn at once, when
// stderr is a terminal and -q is not given, and a silent one otherwise
// (CI logs, pipes, -q): the contract of docs/cli.md.
func newProgress(cmd *cobra.Command, total int64, what string) *progressbar.ProgressBar {
	w := cmd.ErrOrStderr()
	quiet, _ := cmd.Flags().GetBool("quiet")
	return progressbar.NewOptions64(total,
		progressbar.OptionSetDescription(what),
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetVisibility(!quiet && isTerminal(w)),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100_000_000),
	)
}

// spin shows a spinner and the elapsed time on cmd's stderr (under
// newProgress's rules) while work whose library reports no progress runs,
// and clears it when the returned stop is called.
func spin(cmd *cobra.Command, what string) (stop func()) {
	bar := newProgress(cmd, -1, what)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				bar.Add(1)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		bar.Finish()
	}
}

// group makes c a command that only holds subcommands: alone it shows its
// help; an unknown subcommand is a usage error (exit 2) listing the ones
// it has, rather than the help and exit status 0.
func group(c *cobra.Command) *cobra.Command {
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		var names []string
		for _, s := range cmd.Commands() {
			if s.IsAvailableCommand() {
				names = append(names, s.Name())
			}
		}
		return &exitError{code: 2, msg: fmt.Sprintf("%s: unknown command %q: use %s", cmd.Name(), args[0], strings.Join(names, ", "))}
	}
	c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	return c
}
