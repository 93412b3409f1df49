package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/steplab/steplab/datasets/embedded"
	"github.com/steplab/steplab/datasets/importers"
)

func init() { register(newImportCmd) }

func newImportCmd() *cobra.Command {
	var out string
	var force, asJSON bool
	var formatHelp strings.Builder
	for _, f := range importers.Formats() {
		fmt.Fprintf(&formatHelp, "  %-20s %s -> %s table\n", f.Name, f.Summary, f.Table)
	}
	var embeddedHelp strings.Builder
	for _, n := range embedded.Names() {
		d, _ := embedded.Lookup(n)
		fmt.Fprintf(&embeddedHelp, "  embedded:%-27s %s (%s, %s)\n", n, d.Summary, d.Format, d.License)
	}
	cmd := &cobra.Command{
		Use:   "import FORMAT SRC -o DIR",
		Short: "Bring a published trace or a Dynamo FPM record into a steplab dataset",
		Long: `Import converts a trace written by another tool into a steplab dataset:
a directory with manifest.json and one Parquet table. Request traces become the
requests table; Dynamo forward-pass metrics become the steps table. A vLLM
run's engine time series (timeseries.csv beside requests.jsonl) also becomes
the engine_samples table.

Formats:
` + formatHelp.String() + `
A table you already have (Parquet from pandas, DuckDB, Polars or Spark, or a
CSV) with steplab's columns under any names: steplab import table --help.

SRC is a file, a run directory (vllm-requests: requests.jsonl with meta.json
beside it), or a trace shipped inside steplab:
` + embeddedHelp.String() + `
Times are int64 nanoseconds relative to the first arrival (request traces) and
event times a trace does not have are -1. Arrivals must be in time order in
azure and mooncake files (an earlier timestamp is an error); vllm-requests
rows are sorted by queued_ts, the engine's monotonic clock. The manifest
records the source path, its SHA-256, the format and this command.

A bad input stops the import with one error naming the file, the line (or
record) and the problem, exit status 2, and leaves no dataset behind.`,
		Example: `  # from the repository root: an embedded trace, then samples of each format in its tests
  steplab import azure embedded:azure-conv-2023 -o out/azure-conv
  steplab import azure datasets/importers/testdata/azure-code-2023/AzureLLMInferenceTrace_code_head200.csv \
      -o out/azure-code --force
  steplab import mooncake datasets/importers/testdata/mooncake-fast25/conversation_trace_head300.jsonl -o out/mooncake-conv
  steplab import vllm-requests datasets/importers/testdata/llmservingsim-rtx4090-llama-3.1-8b -o out/llama-run
  steplab import dynamo-fpm-artifact datasets/importers/testdata/artifact_complete.json -o out/h200-fpm
  steplab import dynamo-fpm datasets/importers/testdata/fpm_stream.msgpack -o out/live-fpm --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return &exitError{code: 2, msg: fmt.Sprintf("import needs FORMAT and SRC (got %d arguments); see steplab import --help", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return &exitError{code: 2, msg: "import: no output directory: pass -o DIR"}
			}
			format, src := args[0], args[1]
			var size int64 = -1
			if st, err := os.Stat(src); err == nil && !st.IsDir() {
				size = st.Size()
			}
			bar := newProgress(cmd, size, "import "+format)
			start := time.Now()
			res, err := importers.Import(format, src, out, importers.Options{
				Overwrite:   force,
				ToolName:    "steplab",
				ToolVersion: version(),
				Command:     append([]string{"steplab"}, os.Args[1:]...),
				Progress:    func(n int64) { _ = bar.Set64(n) },
			})
			_ = bar.Finish()
			if err != nil {
				return inputError("import", err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintln(cmd.OutOrStdout(), summarizeImport(res, time.Since(start)))
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "dataset directory to write (required)")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing dataset at the output directory (only after a successful import)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.AddCommand(newImportTableCmd())
	return cmd
}

func summarizeImport(r *importers.Result, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Imported %d %s rows from %s (%s) into %s", r.Rows, r.Table, r.Source, r.Format, r.Dir)
	if r.Rows > 0 {
		what := "arrivals span"
		if r.Table == "steps" {
			what = "summed wall time"
		}
		fmt.Fprintf(&b, "; %s %s", what, time.Duration(r.SpanNs).Round(time.Millisecond))
	}
	if r.Skipped > 0 {
		fmt.Fprintf(&b, "; %d records skipped", r.Skipped)
	}
	if r.EngineSamples > 0 {
		fmt.Fprintf(&b, "; %d engine_samples rows", r.EngineSamples)
	}
	notes := "notes"
	if len(r.Notes) == 1 {
		notes = "note"
	}
	fmt.Fprintf(&b, "; source sha256 %s; %d %s in the manifest; took %s.", r.SHA256, len(r.Notes), notes, took.Round(time.Millisecond))
	return b.String()
}
