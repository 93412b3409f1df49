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

// importFlags are the flags every format's import takes.
type importFlags struct {
	out                     string
	force, asJSON           bool
	hardware, model, engine string
}

func (f *importFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVarP(&f.out, "output", "o", "", "dataset directory to write (required)")
	fl.BoolVar(&f.force, "force", false, "replace an existing dataset at the output directory (only after a successful import)")
	fl.BoolVar(&f.asJSON, "json", false, "print the result as JSON")
	fl.StringVar(&f.hardware, "hardware", "", "the GPU the run ran on, where the file does not say (a catalogue name: steplab catalog hardware; or a spec file)")
	fl.StringVar(&f.model, "model", "", "the model the run served, where the file does not say (a catalogue name: steplab catalog models; or a config.json)")
	fl.StringVar(&f.engine, "engine", "", "the serving engine and its release, NAME[@VERSION]: "+strings.Join(importers.Engines, " or ")+", e.g. vllm@0.19.0")
}

const importCommon = `Times are int64 nanoseconds relative to the first arrival (request traces) and
event times a trace does not have are -1. The manifest records the source
path, its SHA-256, the format, this command, and notes on every assumption.

--hardware, --model and --engine say what ran where the file does not (or
says otherwise, noted): a request trace or a benchmark result names no GPU,
and steplab replay requests needs one. Names are checked against the
catalogue (steplab catalog hardware, steplab catalog models) before anything
is read.

A bad input stops the import with one error naming the file, the line (or
record) and the problem, exit status 2, and leaves no dataset behind.`

func newImportCmd() *cobra.Command {
	var fl importFlags
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

Formats (steplab import FORMAT --help: what each reads, and an example on a
sample in the repository):
` + formatHelp.String() + `  table                A Parquet or CSV table you already have, with steplab's
                       columns under any names

SRC is a file, a run directory (vllm-requests: requests.jsonl with meta.json
beside it), or a trace shipped inside steplab:
` + embeddedHelp.String() + `
` + importCommon,
		Example: `  # from the repository root
  steplab import azure embedded:azure-conv-2023 -o out/import-embedded --hardware H100 --model Llama-3.1-8B`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return &exitError{code: 2, msg: fmt.Sprintf("import needs FORMAT and SRC (got %d arguments); see steplab import --help", len(args))}
			}
			return nil
		},
		// Reached for a FORMAT no subcommand has: Import names the formats.
		RunE: func(cmd *cobra.Command, args []string) error { return runImport(cmd, args[0], args[1], &fl) },
	}
	fl.add(cmd)
	for _, f := range importers.Formats() {
		cmd.AddCommand(newImportFormatCmd(f))
	}
	cmd.AddCommand(newImportTableCmd())
	return cmd
}

// newImportFormatCmd is `steplab import FORMAT`: its own help page, with
// what the format reads and an example on a committed sample.
func newImportFormatCmd(f importers.Format) *cobra.Command {
	var fl importFlags
	h := importHelp[f.Name]
	cmd := &cobra.Command{
		Use:     f.Name + " SRC -o DIR",
		Short:   f.Summary,
		Long:    h.long + "\n\n" + importCommon,
		Example: h.example,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &exitError{code: 2, msg: fmt.Sprintf("import %s needs one SRC (got %d arguments); see steplab import %s --help", f.Name, len(args), f.Name)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return runImport(cmd, f.Name, args[0], &fl) },
	}
	fl.add(cmd)
	return cmd
}

func runImport(cmd *cobra.Command, format, src string, fl *importFlags) error {
	if fl.out == "" {
		return &exitError{code: 2, msg: "import: no output directory: pass -o DIR"}
	}
	if err := checkWhatRan(fl); err != nil {
		return err
	}
	var size int64 = -1
	if st, err := os.Stat(src); err == nil && !st.IsDir() {
		size = st.Size()
	}
	bar := newProgress(cmd, size, "import "+format)
	start := time.Now()
	res, err := importers.Import(format, src, fl.out, importers.Options{
		Overwrite:   fl.force,
		ToolName:    "steplab",
		ToolVersion: version(),
		Command:     append([]string{"steplab"}, os.Args[1:]...),
		Progress:    func(n int64) { _ = bar.Set64(n) },
		Hardware:    fl.hardware,
		Model:       fl.model,
		Engine:      fl.engine,
	})
	_ = bar.Finish()
	if err != nil {
		return inputError("import", err)
	}
	if fl.asJSON {
		return writeJSON(cmd.OutOrStdout(), res)
	}
	fmt.Fprintln(cmd.OutOrStdout(), summarizeImport(res, time.Since(start)))
	return nil
}

// checkWhatRan refuses a --hardware or --model the catalogue does not
// resolve, and an --engine that is not NAME[@VERSION], naming the flag.
func checkWhatRan(fl *importFlags) error {
	if _, err := importers.ParseEngine(fl.engine); err != nil {
		return &exitError{code: 2, msg: "import: --engine " + err.Error()}
	}
	if fl.hardware == "" && fl.model == "" {
		return nil
	}
	c, err := catalogOrExit()
	if err != nil {
		return err
	}
	if fl.hardware != "" {
		if _, err := c.LookupHardware(fl.hardware); err != nil {
			return &exitError{code: 2, msg: "import: --hardware: " + strings.TrimPrefix(err.Error(), "model: ")}
		}
	}
	if fl.model != "" {
		if _, err := c.LookupModel(fl.model); err != nil {
			return &exitError{code: 2, msg: "import: --model: " + strings.TrimPrefix(err.Error(), "model: ")}
		}
	}
	return nil
}

func summarizeImport(r *importers.Result, took time.Duration) string {
	var b strings.Builder
	if r.Summary {
		fmt.Fprintf(&b, "Imported the summary of a %s run from %s into %s: no per-request records in the file, so no %s rows; the run's figures are in the manifest's source.detail", r.Format, r.Source, r.Dir, r.Table)
	} else {
		fmt.Fprintf(&b, "Imported %d %s rows from %s (%s) into %s", r.Rows, r.Table, r.Source, r.Format, r.Dir)
	}
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
	fmt.Fprintf(&b, "; source sha256 %s; %d %s in the manifest; took %s.", r.SHA256, len(r.Notes), map[bool]string{true: "note", false: "notes"}[len(r.Notes) == 1], took.Round(time.Millisecond))
	return b.String()
}
