package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/importers"
)

func newImportTableCmd() *cobra.Command {
	var out string
	var opts importers.TableOptions
	var maps []string
	var force, asJSON bool
	cmd := &cobra.Command{
		Use:   "table FILE_OR_DIR -o DATASET --table steps|requests --hardware GPU --model MODEL [--map THEIRS=OURS ...]",
		Short: "Wrap a Parquet or CSV table you already have into a dataset",
		Long: `import table turns a table written by pandas, DuckDB, Polars, Spark or a
spreadsheet into a steplab dataset: the rows, read through steplab's reader,
and a manifest saying what ran (hardware, model, measurement policy).

FILE_OR_DIR is a Parquet file, a folder of Parquet files (any names, also the
key=value folders of a partitioned write), or a CSV file with a header (each
column typed by its cells: integers, floats, true/false, date-times, strings;
an empty cell is a null).

--map THEIRS=OURS renames a column (repeatable, or comma-separated). The
steps table needs step_id, kind, num_prefill_requests, sum_prefill_tokens,
sum_prefill_kv_tokens, num_decode_requests, sum_decode_kv_tokens and
wall_time_ns; requests needs req_id, arrival_ns, prompt_tokens and
output_tokens. Every other column may be absent and reads its documented
default (-1, Unknown, for timings and counts). A required column missing
after the mapping is an error that lists what is missing and the closest
columns the table has. Integer columns of any width, float32, TIMESTAMP (any
unit, into the time columns) and nulls convert; a float where steplab keeps
an integer, or a TIMESTAMP where it keeps a duration, is an error naming the
column.

Columns steplab does not know are left out (--extra drop) or kept in
<table>_extra.parquet beside the table, row for row (--extra keep).
Instants (t_schedule_start ... t_update_end, arrival_ns, ...) move so that the
earliest is 0 (--time-origin first), as the trace importers do; --time-origin
keep leaves them. --hardware and --model name what ran: a catalogue name
(steplab catalog hardware, steplab catalog models), a hardware spec file or
a config.json; the tools that need their figures look them up when they read
the dataset.

The dataset is written under a temporary name and renamed when complete; a
bad input leaves nothing behind (exit status 2).`,
		Example: `  steplab import table datasets/testdata/foreign/duckdb/fixtures/steps_renamed.parquet -o out/table-steps \
      --table steps --hardware H200 --model Llama-3.1-8B \
      --policy-decode production --policy-prefill production \
      --map step=step_id --map batch_kind=kind --map prefill_reqs=num_prefill_requests \
      --map prefill_tokens=sum_prefill_tokens --map prefill_kv_tokens=sum_prefill_kv_tokens \
      --map decode_reqs=num_decode_requests --map decode_kv_tokens=sum_decode_kv_tokens \
      --map wall_ns=wall_time_ns --extra keep`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &exitError{code: 2, msg: fmt.Sprintf("import table needs one FILE_OR_DIR (got %d arguments); see steplab import table --help", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return &exitError{code: 2, msg: "import table: no output directory: pass -o DATASET"}
			}
			opts.Map = map[string]string{}
			for _, m := range maps {
				for _, pair := range strings.Split(m, ",") {
					theirs, ours, ok := strings.Cut(pair, "=")
					if !ok || theirs == "" || ours == "" {
						return &exitError{code: 2, msg: fmt.Sprintf("import table: --map %q: want THEIRS=OURS", pair)}
					}
					opts.Map[strings.TrimSpace(theirs)] = strings.TrimSpace(ours)
				}
			}
			opts.Overwrite, opts.ToolName, opts.ToolVersion = force, "steplab", version()
			opts.Command = append([]string{"steplab"}, os.Args[1:]...)
			start := time.Now()
			stop := spin(cmd, "importing")
			res, err := importers.ImportTable(args[0], out, opts)
			stop()
			if err != nil {
				return &exitError{code: 2, msg: "import table: " + err.Error()}
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Imported %d %s rows from %s into %s; source sha256 %s; took %s.\n",
				res.Rows, res.Table, res.Source, res.Dir, res.SHA256, time.Since(start).Round(time.Millisecond))
			for _, n := range res.Notes {
				fmt.Fprintf(cmd.OutOrStdout(), "note: %s\n", n)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "dataset directory to write (required)")
	f.StringVar(&opts.Table, "table", "", "the table the source holds: "+datasets.TableSteps+" or "+datasets.TableRequests+" (required)")
	f.StringArrayVar(&maps, "map", nil, "rename a column, THEIRS=OURS (repeatable, or comma-separated)")
	f.StringVar(&opts.Extra, "extra", importers.ExtraDrop, "columns steplab does not know: drop, or keep (in <table>_extra.parquet)")
	f.StringVar(&opts.TimeOrigin, "time-origin", importers.OriginFirst, "first: instants move so the earliest is 0; keep: as the table has them")
	f.StringVar(&opts.Hardware, "hardware", "", "the GPU the rows ran on (a preset name fills its specifications) (required)")
	f.StringVar(&opts.Model, "model", "", "the model the rows ran (a preset name fills its shape) (required)")
	f.StringVar(&opts.PolicyDecode, "policy-decode", "", "measurement policy of decode steps: steady_state_second_step, admission_step, production or single_step")
	f.StringVar(&opts.PolicyPrefill, "policy-prefill", "", "measurement policy of prefill steps (as --policy-decode)")
	f.BoolVar(&force, "force", false, "replace an existing dataset at the output directory (only after a successful import)")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}
