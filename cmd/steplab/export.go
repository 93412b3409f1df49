package main

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/export"
)

func init() { register(newExportCmd) }

func newExportCmd() *cobra.Command {
	var format, out, window string
	var tables []string
	var asJSON, force bool
	cmd := &cobra.Command{
		Use:   "export DIR --format csv|arrow|perfetto|blis -o OUT",
		Short: "Write a dataset's tables as CSV or Arrow IPC files, its step timeline for Perfetto, or its requests as a BLIS trace",
		Long: `export writes each table of a dataset as one file in OUT (created if needed):
OUT/<table>.csv for spreadsheets and pandas.read_csv, or OUT/<table>.arrow
(Arrow IPC file format) for pyarrow, polars and DuckDB.

--format perfetto writes one file, OUT (e.g. trace.json): the step timeline
in Chrome trace event format for ui.perfetto.dev and chrome://tracing. Per
worker a scheduler track (schedule, dispatch, update), an in-flight track
(wait: dispatch to output) and a device track (gpu_time_ns ending at
t_output), queue and KV counters, and every request as an async slice from
arrival to finish with its first token marked. A whole run can be large
(about 1.2 KB per step): the size is announced before anything is written,
and --window START:END keeps the steps scheduled, and the requests alive,
within those seconds of the run. See docs/report.md.

--format blis writes the requests as a BLIS (inference-sim) TraceV2 trace:
OUT.yaml (header) and OUT.csv (data), as blis run --trace-output OUT does,
for blis replay --trace-header OUT.yaml --trace-data OUT.csv. Arrivals,
prompt and output lengths, recorded first-token and finish times, statuses,
and shared prefixes (requests whose prefix_hash_ids start alike) as prefix
groups; the manifest's model and engine limits in the header.

Columns come from the table's Parquet schema: int64, int32, float64, bool,
utf8 and list<int64> (prefix_hash_ids). In CSV the first row names the
columns, lists are JSON arrays in one cell ("[1,2,3]"), floats read back
exactly (NaN, inf), and -1 stays -1 (unknown). Rows stream in bounded
batches; each file is written under a temporary name and renamed when done.

Examples, from the repository root (a committed H200 capture, one minute):
  steplab export datasets/h200/traffic-azure-5rps --format csv -o out/run-csv
  steplab export datasets/h200/traffic-azure-5rps --format arrow -o out/run-arrow --tables steps,requests
  steplab export datasets/h200/traffic-azure-5rps --format perfetto -o out/run-trace.json
  steplab export datasets/h200/traffic-azure-5rps --format perfetto -o out/export-s20-30.json --window 20:30
  steplab export datasets/h200/traffic-azure-5rps --format blis -o out/run-blis
  python -c "import pandas as pd; print(pd.read_csv('out/run-csv/steps.csv').describe())"
  python -c "import pyarrow.ipc as ipc; print(ipc.open_file('out/run-arrow/steps.arrow').read_all())"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format = strings.ToLower(format)
			target := out
			if format == export.BLIS && out != "" {
				target = out + ".csv" // OUT is a prefix: OUT.csv and OUT.yaml
			}
			if !slices.Contains([]string{export.CSV, export.Arrow, export.Perfetto, export.BLIS}, format) {
				return &exitError{code: 2, msg: fmt.Sprintf("export: --format %q: want csv, arrow, perfetto or blis", format)}
			}
			if err := refuseExisting("export", target, force); err != nil {
				return err
			}
			switch format {
			case export.Perfetto:
				return runPerfettoExport(cmd, args[0], out, window, asJSON)
			case export.BLIS:
				return runBLISExport(cmd, args[0], out, asJSON)
			case export.CSV, export.Arrow:
			default:
				return &exitError{code: 2, msg: fmt.Sprintf("export: --format %q: want csv, arrow, perfetto or blis", format)}
			}
			var sel []string
			for _, t := range tables {
				for _, name := range strings.Split(t, ",") {
					if name = strings.TrimSpace(name); name != "" {
						sel = append(sel, name)
					}
				}
			}
			for _, t := range sel {
				known := false
				for _, k := range datasets.KnownTables() {
					known = known || k == t
				}
				if !known {
					return &exitError{code: 2, msg: fmt.Sprintf("export: --tables: unknown table %q (tables: %s)", t, strings.Join(datasets.KnownTables(), ", "))}
				}
			}
			bar := newProgress(cmd, -1, "exporting")
			res, err := export.Dataset(args[0], out, export.Options{Format: format, Tables: sel,
				Progress: func(table string, rows int64) { bar.Describe("exporting " + table); bar.Set64(rows) }})
			bar.Finish()
			if err != nil {
				return &exitError{code: 2, msg: "export: " + err.Error()}
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "TABLE\tROWS\tFILE")
			for _, f := range res.Files {
				fmt.Fprintf(tw, "%s\t%d\t%s\n", f.Table, f.Rows, f.Path)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&format, "format", "", "csv, arrow, perfetto or blis (required)")
	cmd.Flags().StringVarP(&out, "output", "o", "", "output directory (csv, arrow), file (perfetto) or file prefix (blis) (required)")
	cmd.Flags().StringSliceVar(&tables, "tables", nil, "tables to export, comma-separated (default: all the dataset has)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the files written as JSON")
	forceFlag(cmd, &force)
	cmd.Flags().StringVar(&window, "window", "", "perfetto: only START:END seconds of the run (either may be empty)")
	return cmd
}

// runPerfettoExport writes the step timeline of a dataset as a Chrome
// trace event file (--format perfetto), announcing its size first.
func runPerfettoExport(cmd *cobra.Command, dir, out, window string, asJSON bool) error {
	opts := export.PerfettoOptions{}
	if window != "" {
		from, to, err := parseWindow(window)
		if err != nil {
			return &exitError{code: 2, msg: "export: --window " + err.Error()}
		}
		opts.FromNs, opts.ToNs = from, to
	}
	size, err := export.PerfettoEstimate(dir, opts)
	if err != nil {
		return &exitError{code: 2, msg: "export: " + err.Error()}
	}
	if window != "" && size.Steps == 0 && size.Requests == 0 {
		return &exitError{code: 2, msg: fmt.Sprintf("export: --window %s holds no step or request of %s: give seconds within the run (steplab inspect %s shows its time span)", window, dir, dir)}
	}
	hint := ""
	if window == "" {
		hint = "; --window START:END (seconds of the run) bounds it"
	}
	slog.Info(fmt.Sprintf("perfetto: writing about %s (%d steps, %d requests)%s", humanBytes(size.Bytes), size.Steps, size.Requests, hint))
	bar := newProgress(cmd, size.Steps+size.Requests, "exporting")
	opts.Progress = func(table string, rows int64) {
		if table == datasets.TableRequests {
			rows += size.Steps
		}
		bar.Set64(rows)
	}
	res, err := export.PerfettoTrace(dir, out, opts)
	bar.Finish()
	if err != nil {
		return &exitError{code: 2, msg: "export: " + err.Error()}
	}
	if asJSON {
		return writeJSON(cmd.OutOrStdout(), res)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %d steps, %d requests, %d events (workers: %s); open it in ui.perfetto.dev or chrome://tracing\n",
		res.Path, res.Steps, res.Requests, res.Events, strings.Join(res.Workers, ", "))
	return nil
}

// parseWindow reads START:END in seconds of the run (either may be empty)
// into nanoseconds; an empty END is the end of the run (0).
func parseWindow(s string) (from, to int64, err error) {
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("%q: want START:END in seconds, e.g. 120:180 or 600:", s)
	}
	sec := func(v string) (int64, error) {
		if v == "" {
			return 0, nil
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, fmt.Errorf("%q: %q is not a number of seconds >= 0", s, v)
		}
		return int64(f * 1e9), nil
	}
	if from, err = sec(a); err != nil {
		return 0, 0, err
	}
	if to, err = sec(b); err != nil {
		return 0, 0, err
	}
	if to != 0 && to <= from {
		return 0, 0, fmt.Errorf("%q: the end must come after the start", s)
	}
	return from, to, nil
}

func humanBytes(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.0f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.0f KB", float64(n)/1e3)
}

// runBLISExport writes the requests of a dataset as a BLIS trace
// (--format blis).
func runBLISExport(cmd *cobra.Command, dir, out string, asJSON bool) error {
	res, err := export.BLISTrace(dir, out)
	if err != nil {
		return &exitError{code: 2, msg: "export: " + err.Error()}
	}
	if asJSON {
		return writeJSON(cmd.OutOrStdout(), res)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wrote %d requests as a BLIS trace: %s (header), %s (data); run it with blis replay --trace-header %s --trace-data %s\n",
		res.Requests, res.Header, res.Data, res.Header, res.Data)
	for _, n := range res.Notes {
		fmt.Fprintln(cmd.OutOrStdout(), "note:", n)
	}
	return nil
}
