package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/pricing"
	"github.com/steplab/steplab/replay"
	"github.com/steplab/steplab/scenario"
)

func init() { register(newReplayCmd) }

func newReplayCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Compare a model with a recorded run, step by step or request by request",
		Long: `replay runs a recorded dataset through a model and shows where prediction and
record part (docs/replay.md).

  replay steps FPM DATASET -o OUT        re-price every recorded step
  replay requests FPM DATASET -o OUT     re-simulate the recorded requests

FPM is a forward-pass model: an artifact (steplab fit, steplab calibrate), the word
"roofline" (the prior from the manifest's hardware and model shape), or an
ops spec: "ops", "ops:NAME" or "ops:DIR", the measured-operations prior of
that shape from a kernel database (docs/ops-prior.md).`,
	}
	cmd.AddCommand(newReplayStepsCmd(), newReplayRequestsCmd())
	return group(cmd)
}

func openDataset(dir string) (*datasets.Dataset, error) {
	d, err := datasets.Open(dir)
	if err != nil {
		return nil, &exitError{code: 2, msg: err.Error()}
	}
	return d, nil
}

func newReplayStepsCmd() *cobra.Command {
	var out, host string
	var asJSON, force, stepsOnly, noFigures bool
	var top int
	var level float64
	cmd := &cobra.Command{
		Use:   "steps FPM DATASET -o OUT",
		Short: "Re-price every recorded step with a model and compare its timing fields",
		Long: `steps re-prices every step of DATASET's steps table: the model prices its
device time (gpu_time_ns) and the simulated executor's host model its host
phases (host_prep_ns, schedule). narrow_time_ns and wall_time_ns depend on
the previous step under async scheduling; they are re-derived one step ahead
from this step's predicted phases and the recorded events of the steps
before it. With the model that generated a simulated dataset every field is
reproduced to the nanosecond.

A model with prediction intervals (a recipe, linear or grid artifact) also
predicts the device time's interval at --level (the wall time's is the same
interval carried over), and the summary says how many recorded steps fell
inside it, by kind.

OUT is written as a directory:
  step_comparison.parquet/  one row per step: recorded, predicted, error, relative error per field;
                            pred_{gpu,wall}_time_{lo,hi}_ns, the interval
  summary.json          error by kind, role, batch-size bucket and decile of the run;
                        the term the device-time error is attributed to; the steps
                        where prediction and record part most, with their composition
  steps.time.{png,svg}       recorded vs predicted over time
  steps.error_cdf.{png,svg}  CDF of |relative error| per step kind

Examples, from the repository root (the committed H200 model and traffic):
  steplab replay steps datasets/h200/models/steady-gpu.json datasets/h200/traffic-azure-12rps -o out/replay-steps
  steplab replay steps roofline datasets/h200/traffic-azure-5rps -o out/replay-rs --json
  # fastest, approximate prefill attention:
  steplab replay steps datasets/h200/models/steady-gpu.json datasets/h200/traffic-azure-12rps -o out/rs-fast --steps-only`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return &exitError{code: 2, msg: "replay steps: no output directory: use -o OUT"}
			}
			d, err := openDataset(args[1])
			if err != nil {
				return err
			}
			m, err := pricing.FromManifest(d.Manifest, args[0], host)
			if err != nil {
				return &exitError{code: 2, msg: "replay steps: " + err.Error()}
			}
			bar := newProgress(cmd, -1, "replaying steps")
			start := time.Now()
			rep, err := replay.RunSteps(d, replay.StepOptions{FPM: m.FPM, Host: m.Host, TopN: top, NoJoin: stepsOnly, Level: level,
				Progress: func(n int64) { bar.Set64(n) }},
				replay.Output{Dir: out, Overwrite: force, Command: os.Args, ModelName: pricing.Name(m), DatasetDir: args[1], NoFigures: noFigures})
			bar.Finish()
			if err != nil {
				return err
			}
			el := time.Since(start)
			rep.Summary.Notes = append(rep.Summary.Notes, m.Notes...)
			rep.Summary.Notes = append(rep.Summary.Notes, pricing.HostNote(m))
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), rep.Summary)
			}
			printStepReport(cmd.OutOrStdout(), rep, el)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "output directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print summary.json to stdout")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing output directory")
	cmd.Flags().StringVar(&host, "host-model", "", "host-overhead model (default: FPM's params.host, else the prior)")
	cmd.Flags().BoolVar(&stepsOnly, "steps-only", false, "ignore step_requests (faster; prefill attention and new-request tokens approximated)")
	cmd.Flags().BoolVar(&noFigures, "no-figures", false, "skip the PNG/SVG figures")
	cmd.Flags().IntVar(&top, "top", 20, "steps to report where prediction and record part most")
	levelFlag(cmd, &level)
	return cmd
}

func printStepReport(w io.Writer, rep *replay.StepReport, el time.Duration) {
	s := rep.Summary
	fmt.Fprintf(w, "replayed %d steps of %s with %s in %s (%.2fM steps/s)\n", s.Steps, s.Dataset, s.Model,
		el.Round(time.Millisecond), float64(s.Steps)/el.Seconds()/1e6)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	cover := map[string]replay.FieldCoverage{}
	covHead := ""
	if s.Intervals != nil {
		for _, fc := range s.Intervals.Fields {
			cover[fc.Field] = fc
		}
		covHead = fmt.Sprintf("in %.0f%% interval %%\t", 100*s.Intervals.Level)
	}
	fmt.Fprintln(tw, "field\tsteps\trecorded ms\tpredicted ms\tbias ms\tMAPE %\tp90 |rel| %\texact\t"+covHead)
	for _, f := range replay.Fields {
		cov := ""
		if s.Intervals != nil {
			cov = "-\t"
			if fc, ok := cover[f]; ok {
				cov = fmt.Sprintf("%.1f\t", fc.Overall.Pct)
			}
		}
		st, ok := s.Overall.Fields[f]
		if !ok {
			fmt.Fprintf(tw, "%s\t0\t-\t-\t-\t-\t-\t-\t%s\n", f, cov)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%+.3f\t%.2f\t%.2f\t%d\t%s\n", f, st.N, st.RecMeanMs, st.PredMeanMs, st.BiasMs, 100*st.MAPE, 100*st.AbsRelP90, st.Exact, cov)
	}
	tw.Flush()
	if fc, ok := cover[s.PrimaryField]; ok {
		fmt.Fprintf(w, "\n%s inside its %.0f%% interval by kind:", s.PrimaryField, 100*s.Intervals.Level)
		for _, k := range []string{"prefill", "decode", "mixed", "other"} {
			if c, ok := fc.ByKind[k]; ok {
				fmt.Fprintf(w, " %s %.1f%% (%d)", k, c.Pct, c.N)
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\n%s MAPE by kind:", s.PrimaryField)
	for _, g := range s.ByKind {
		fmt.Fprintf(w, " %s %.2f%% (%d)", g.Group, 100*g.Fields[s.PrimaryField].MAPE, g.Steps)
	}
	fmt.Fprintln(w)
	if a := s.Attribution; a != nil && a.Top != "" {
		fmt.Fprintf(w, "%s error attributed to %s (%.0f%% of the explained error, R² %.3f)", a.Target, a.Top, 100*a.Terms[0].Share, a.R2)
		if len(a.Collinear) > 0 {
			fmt.Fprintf(w, "; collinear with %v here", a.Collinear)
		}
		fmt.Fprintln(w)
	}
	if len(s.Top) > 0 {
		t := s.Top[0]
		fmt.Fprintf(w, "largest %s error: step %d (%s, %g prefill + %g decode requests): %.3f ms recorded, %.3f ms predicted\n",
			t.Field, t.StepID, t.Kind, t.Features.PrefillRequests, t.Features.DecodeRequests, t.RecMs, t.PredMs)
	}
	for _, n := range s.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	fmt.Fprintln(w, "wrote:")
	for _, f := range rep.Files {
		fmt.Fprintln(w, " ", f)
	}
}

func newReplayRequestsCmd() *cobra.Command {
	var out, host, placement string
	var asJSON, force bool
	var level, holdout float64
	cmd := &cobra.Command{
		Use:   "requests FPM DATASET -o OUT",
		Short: "Re-simulate the recorded requests and compare TTFT, ITL and E2E",
		Long: `requests re-simulates DATASET's recorded requests (arrival times, prompt and
output lengths) on the engine of its manifest (limits, KV blocks, CUDA-graph
sizes, async scheduling; defaults with a warning where the manifest is
silent) with the model, and compares each request's TTFT, ITL ((finish −
first token)/(outputs − 1)) and E2E, and their distributions (mean, p50,
p90, p99). Where the record has steps, the step composition is compared
too (steps per kind, mean batch size, mean tokens per step).

A model with prediction intervals carries them to the latencies: the trace
is re-simulated twice more, with every step at the lower edge of its interval
at --level and at the upper edge (deterministic; they bound the systematic
error that compounds through queueing, which independent per-step draws
would average away). The summary gives each latency's distribution in both
runs and how many recorded requests lay between their two re-simulated
latencies; with --holdout F, also how many of the last F of the requests by
arrival did (those calibrate --holdout F left out of its fit). A model that
records no uncertainty is re-simulated once and the summary says so.

Where DATASET has engine samples (an imported vLLM run's timeseries.csv:
running and waiting requests and KV-cache usage over time), the
re-simulated engine's state is resampled onto the recorded times and each
curve's mean absolute error is reported.

OUT is written as a directory: request_comparison.parquet/ (one row per
request, with pred_{ttft,itl,e2e}_{lo,hi}_ns), summary.json and, with engine
samples, engine_samples.parquet/ (recorded and re-simulated state per
sample) and the figures engine.running, engine.waiting and engine.kv_usage
(.png, .svg).

Examples, from the repository root:
  steplab import vllm-requests embedded:llmservingsim-llama-3.1-8b -o out/replay-llama
  steplab replay requests roofline out/replay-llama -o out/replay-rr
  steplab calibrate out/replay-llama -o out/replay-llama-cal.json --holdout 0.5
  steplab replay requests out/replay-llama-cal.json out/replay-llama -o out/replay-rr-cal --holdout 0.5
  steplab replay requests datasets/h200/models/steady-gpu.json datasets/h200/traffic-azure-5rps -o out/rr-h200 --json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return &exitError{code: 2, msg: "replay requests: no output directory: use -o OUT"}
			}
			d, err := openDataset(args[1])
			if err != nil {
				return err
			}
			if w := d.Manifest.Workload; w != nil && w.Kind == "summary" {
				return &exitError{code: 2, msg: fmt.Sprintf("replay requests: %s holds the summary of a benchmark run, no requests to replay: re-run the benchmark with its per-request output (vllm bench serve --save-detailed, sglang.bench_serving --output-details) and import that", args[1])}
			}
			o, err := manifestOptions(args[0], host, placement)
			if err != nil {
				return err
			}
			p, warn, err := scenario.PlanFromManifest(d.Manifest, o)
			if err != nil {
				msg := "replay requests: " + err.Error()
				if m := d.Manifest; m.Source.Kind == "import" && (m.Hardware == nil || m.Hardware.GPUName == "" || m.Model == nil) {
					msg += fmt.Sprintf("; %s was imported from a file that does not say what ran: import it again with --hardware GPU --model MODEL (steplab import %s --help)", args[1], m.Source.Format)
				}
				return &exitError{code: 2, msg: msg}
			}
			stop := spin(cmd, "replaying requests")
			sum, err := replay.RunRequests(d, replay.RequestOptions{Plan: p.Plan, Warnings: warn, Level: level, Holdout: holdout},
				replay.Output{Dir: out, Overwrite: force, Command: os.Args, ModelName: pricing.Name(&p.Pools[0].Engine.Models), DatasetDir: args[1]})
			stop()
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), sum)
			}
			printRequestReport(cmd.OutOrStdout(), sum)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "output directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print summary.json to stdout")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing output directory")
	cmd.Flags().StringVar(&host, "host-model", "", "host-overhead model (default: FPM's params.host, else the prior)")
	levelFlag(cmd, &level)
	cmd.Flags().Float64Var(&holdout, "holdout", 0, "also score the interval on the last fraction of the requests by arrival (calibrate --holdout's held-out part)")
	cmd.Flags().StringVar(&placement, "cluster", "", "placement file: what the manifest does not record (router, links, engine keys) or a what-if placement (pools) (docs/placement.md)")
	return cmd
}

// levelFlag adds --level: the coverage of the prediction intervals of a
// model that has them.
func levelFlag(cmd *cobra.Command, level *float64) {
	cmd.Flags().Float64Var(level, "level", 0, "coverage of the prediction intervals, e.g. 0.9 (0: the model's own; negative: none)")
}

func printRequestReport(w io.Writer, s *replay.RequestSummary) {
	fmt.Fprintf(w, "re-simulated %d requests of %s with %s: %d compared, %d finished in simulation\n", s.Requests, s.Dataset, s.Model, s.Compared, s.Finished)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "metric (ms)\trec mean\tsim mean\terr\trec p50\tsim p50\terr\trec p90\tsim p90\terr\trec p99\tsim p99\terr\t")
	for _, r := range []struct {
		n string
		d replay.DistCompare
	}{{"TTFT", s.TTFT}, {"ITL", s.ITL}, {"E2E", s.E2E}} {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%+.1f%%\t%.2f\t%.2f\t%+.1f%%\t%.2f\t%.2f\t%+.1f%%\t%.2f\t%.2f\t%+.1f%%\t\n", r.n,
			r.d.Recorded.Mean, r.d.Predicted.Mean, 100*r.d.RelErr["mean"], r.d.Recorded.P50, r.d.Predicted.P50, 100*r.d.RelErr["p50"],
			r.d.Recorded.P90, r.d.Predicted.P90, 100*r.d.RelErr["p90"], r.d.Recorded.P99, r.d.Predicted.P99, 100*r.d.RelErr["p99"])
	}
	tw.Flush()
	if s.NoUncertainty != "" {
		fmt.Fprintf(w, "\n%s\n", s.NoUncertainty)
	}
	if iv := s.Intervals; iv != nil {
		fmt.Fprintf(w, "\n%.0f%% interval (%s):\n", 100*iv.Level, iv.Method)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		head := "metric (ms)\tmean [lo, hi]\tp50 [lo, hi]\tp90 [lo, hi]\tp99 [lo, hi]\trecorded inside %\t"
		if iv.TTFT.HeldOutN > 0 {
			head += fmt.Sprintf("held-out inside %% (last %d)\t", iv.TTFT.HeldOutN)
		}
		fmt.Fprintln(tw, head)
		for _, r := range []struct {
			n string
			l replay.LatencyInterval
		}{{"TTFT", iv.TTFT}, {"ITL", iv.ITL}, {"E2E", iv.E2E}} {
			fmt.Fprintf(tw, "%s\t[%.2f, %.2f]\t[%.2f, %.2f]\t[%.2f, %.2f]\t[%.2f, %.2f]\t%.1f\t", r.n, r.l.Lo.Mean, r.l.Hi.Mean,
				r.l.Lo.P50, r.l.Hi.P50, r.l.Lo.P90, r.l.Hi.P90, r.l.Lo.P99, r.l.Hi.P99, r.l.CoveragePct)
			if iv.TTFT.HeldOutN > 0 {
				fmt.Fprintf(tw, "%.1f\t", r.l.HeldOutCoveragePct)
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	if s.RecordedSteps != nil && s.SimulatedSteps != nil {
		fmt.Fprintf(w, "steps: recorded %d (mean batch %.1f, %.0f tokens/step), simulated %d (mean batch %.1f, %.0f tokens/step)\n",
			s.RecordedSteps.Steps, s.RecordedSteps.MeanBatchSize, s.RecordedSteps.MeanTokens,
			s.SimulatedSteps.Steps, s.SimulatedSteps.MeanBatchSize, s.SimulatedSteps.MeanTokens)
	} else if s.SimulatedSteps != nil {
		kinds := make([]string, 0)
		for k := range s.SimulatedSteps.StepsByKind {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		fmt.Fprintf(w, "simulated steps: %d (mean batch %.1f, %.0f tokens/step); the record has no steps table\n",
			s.SimulatedSteps.Steps, s.SimulatedSteps.MeanBatchSize, s.SimulatedSteps.MeanTokens)
	}
	if c := s.EngineCurves; c != nil {
		fmt.Fprintf(w, "engine curves (%d samples): running %.1f recorded, %.1f simulated, mean |error| %.2f; waiting %.1f, %.1f, %.2f",
			c.Samples, c.Running.RecMean, c.Running.PredMean, c.Running.MAE, c.Waiting.RecMean, c.Waiting.PredMean, c.Waiting.MAE)
		if k := c.KVUsage; k != nil {
			fmt.Fprintf(w, "; KV usage %.1f%%, %.1f%%, %.1f points", 100*k.RecMean, 100*k.PredMean, 100*k.MAE)
		}
		fmt.Fprintln(w)
		for _, n := range c.Notes {
			fmt.Fprintln(w, "note:", n)
		}
	}
	for _, m := range s.Warnings {
		fmt.Fprintln(w, "warning:", m)
	}
}
