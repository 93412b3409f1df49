package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/steplab/steplab/report"
)

func init() { register(newReportCmd) }

func newReportCmd() *cobra.Command {
	var out, modelPath, title string
	var stamp, asJSON, force bool
	var maxSVG, worst int
	cmd := &cobra.Command{
		Use:   "report (DATASET|RUN|FPM)... -o report.html",
		Short: "Render datasets, a model's fit quality, replays and what-if runs as one self-contained HTML page",
		Long: `report writes one HTML page that a person can open, mail or attach to a
review: figures inlined as SVG (PNG for dense scatter plots), CSS inline,
nothing loaded from the network. The SVG of a run directory is sanitised
(an allow-list of what plots draw with) and the page's Content-Security-
Policy runs no script, so a report of someone else's files is safe to open.
A figure the data cannot give (zero times on a log axis, no placements) is
a note in its place.

Each path is recognised by what it contains:
  DIR with audit.json      a what-if run (steplab whatif -o DIR)
  DIR with sweep.json      a sweep (steplab sweep -o DIR)
  DIR with summary.json    a step replay (steplab replay steps -o DIR)
  DIR with manifest.json   a dataset (capture, simulation, import)
  FILE.json                a model artifact (steplab fit -o FILE.json)

The page has the sections that apply, in this order:
  Dataset summary     per dataset: provenance, tables, steps by kind and role,
                      wall time by kind and batch size (table and figure),
                      payload, requests
  Fit quality         with a model (--fpm, a model among the paths, or the
                      model a replay used): its coefficients, and per dataset
                      the error table (overall, per kind, per batch bucket),
                      the worst steps, predicted vs measured and the error CDF
  Replay comparison   per replay: error per timing field, by kind and batch
                      size, the term the error is attributed to, the worst
                      steps, recorded vs predicted over time, error CDF
  What-if results     per run: the offered-load audit and stage latencies
                      per placement with figures; per sweep: every point and
                      the throughput and p90-latency figures

Examples, from the repository root:
  steplab report datasets/h200/bench-steady datasets/h200/traffic-azure-5rps \
      --fpm datasets/h200/models/steady-decode.json -o out/report.html
  steplab report datasets/h200/models/steady-decode.json datasets/h200/traffic-azure-12rps -o out/fit.html --json

  # a step replay and a what-if sweep on one page
  steplab replay steps datasets/h200/models/steady-gpu.json datasets/h200/traffic-azure-12rps -o out/review-rs
  steplab sweep examples/whatif/encoder-ensemble.yaml -o out/review-sweep --vary load.rate_rps=20,40,60
  steplab report out/review-rs out/review-sweep -o out/review-help.html`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := refuseExisting("report", out, force); err != nil {
				return err
			}
			opts := report.Options{Paths: args, Model: modelPath, Title: title, Tool: "steplab " + version(),
				MaxInlineSVG: maxSVG, Worst: worst}
			if stamp {
				opts.Now = time.Now()
			}
			var bar *progressbar.ProgressBar // made when the parts of the page are known
			opts.Progress = func(begun, total int) {
				if bar == nil {
					bar = newProgress(cmd, int64(total), "report")
				}
				bar.Set(begun - 1)
			}
			res, err := report.WriteFile(out, opts)
			if bar != nil {
				bar.Finish()
			}
			if err != nil {
				return inputError("report", err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), struct {
					Output string `json:"output"`
					*report.Result
				}{out, res})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%d KB): %s; %d figures\n", out, (res.Bytes+1023)/1024, strings.Join(res.Sections, ", "), res.Figures)
			for _, n := range res.Notes {
				fmt.Fprintln(cmd.ErrOrStderr(), "note:", n)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "HTML file to write (required)")
	forceFlag(cmd, &force)
	cmd.Flags().StringVar(&modelPath, "fpm", "", "forward-pass model artifact whose fit quality is reported on the datasets given")
	// --model was this flag's first name; "model" now means the LLM everywhere.
	cmd.Flags().StringVar(&modelPath, "model", "", "")
	_ = cmd.Flags().MarkDeprecated("model", "use --fpm (a model is the LLM; the artifact is a forward-pass model)")
	cmd.Flags().StringVar(&title, "title", "", `page title (default "steplab report")`)
	cmd.Flags().BoolVar(&stamp, "timestamp", false, "stamp the page with the time it was made (off: the same inputs give the same bytes)")
	cmd.Flags().IntVar(&maxSVG, "max-inline-svg", 300_000, "largest figure inlined as SVG, in bytes; larger ones are embedded as PNG")
	cmd.Flags().IntVar(&worst, "worst", 10, "worst steps listed per table")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was written as JSON")
	return cmd
}
