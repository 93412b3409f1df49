package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
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
  steplab import azure embedded:azure-conv-2023 -o ds   # bring a trace in
  steplab inspect ds                                     # what is in it
  steplab validate ds                                    # is it consistent
  steplab export ds --format csv -o ds-csv               # hand it to a spreadsheet or pandas`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, args []string) {
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			if quiet {
				level = slog.LevelWarn
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
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

// newProgress returns a progress bar on stderr when it is a terminal, and a
// silent one otherwise (CI logs, pipes).
func newProgress(total int64, what string) *progressbar.ProgressBar {
	visible := term.IsTerminal(int(os.Stderr.Fd()))
	return progressbar.NewOptions64(total,
		progressbar.OptionSetDescription(what),
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetVisibility(visible),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100_000_000),
	)
}
