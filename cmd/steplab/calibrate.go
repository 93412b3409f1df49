package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/steplab/steplab/replay"
	"github.com/steplab/steplab/scenario"
)

func init() { register(newCalibrateCmd) }

func newCalibrateCmd() *cobra.Command {
	var out, start, host, placement string
	var holdoutDirs, terms, hostParams, moeParams []string
	var holdout float64
	var maxEvals int
	var asJSON, force, noStepFit bool
	var ridge float64
	cmd := &cobra.Command{
		Use:   "calibrate DATASET... -o model.json",
		Short: "Fit FPM and host-overhead multipliers so that re-simulated requests match the record",
		Long: `calibrate fits a small parameter vector — a multiplier on each term of the
start model and on the host model's fixed costs between steps (schedule() +
update_from_output(), worker input preparation) — so that the recorded
requests, re-simulated on each dataset's engine (as replay requests does),
match the record: mean, p50 and p90 of TTFT and ITL and mean E2E. It
minimises Σ log(predicted/recorded)² by a coarse coordinate search then
Nelder-Mead over the log-multipliers: deterministic, a bounded number of
replays (--max-evals).

The start model is --start (a linear artifact: its coefficients are
scaled), else the first dataset's prior (fpm: prior): the measured-operations
prior where a kernel database is shipped for its GPU and prices its model
(terms gemm, prefill_attn, decode_attn), else the roofline (the same and
overhead).

Where the datasets record step times (a steps table with gpu_time_ns, as
steplab's captures do), the FPM terms are first fitted on the steps
(non-negative least squares in relative error on each step's part times;
the ops prior's per-step engine costs beside them), which separate the
parts that request metrics cannot. The request search starts there, a
ridge on the terms' log-multipliers (--ridge) pulling them back: by
default so strongly toward a step fit that the search moves the host
costs alone, with weight 0.1 toward the start where no step is timed
(--no-step-fit skips the step fit). Warnings name a multiplier outside
[0.5, 2], parts the steps do not separate, and a search stopped at
--max-evals.

Each dataset is re-simulated on the engines its manifest records, the GPU
and the model from the catalogue: a vLLM run with data_parallel_size and
enable_expert_parallel becomes that many ranks of one expert-parallel
instance, and its expert compute, expert streaming and all-to-all get
multipliers too (--moe; docs/placement.md).

Hold-outs: --holdout F keeps the last fraction F of each dataset's requests
(by arrival) out of the fit and scores them after it, re-simulating the whole
run; --holdout-dataset DIR scores whole runs that were not fitted.

The artifact has the start's form (ops, roofline or linear); the fitted host model is in its
params.host, which replay and simulate-by-replay read back; the fit report
is in its metrics.

Examples, from the repository root:
  steplab import vllm-requests embedded:llmservingsim-llama-3.1-8b -o out/cal-llama
  steplab calibrate out/cal-llama -o out/llama-cal.json --holdout 0.3
  steplab calibrate datasets/h200/traffic-azure-5rps -o out/h200-cal.json \
      --holdout-dataset datasets/h200/traffic-azure-12rps
  steplab calibrate datasets/h200/traffic-azure-5rps -o out/h200-two.json --terms gemm,decode_attn --host host.prep_fixed
  steplab replay requests out/llama-cal.json out/cal-llama -o out/cal-rr`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := refuseExisting("calibrate", out, force); err != nil {
				return err
			}
			spec := replay.CalibSpec{Datasets: args, HoldoutDatasets: holdoutDirs, Holdout: holdout, Start: start,
				HostModel: host, Cluster: placement, Terms: terms, MaxEvals: maxEvals,
				NoStepFit: noStepFit, Ridge: ridge}
			if cmd.Flags().Changed("host") {
				spec.Host = append([]string{}, hostParams...)
			}
			if cmd.Flags().Changed("moe") {
				spec.MoE = append([]string{}, moeParams...)
			}
			run, err := spec.Setup()
			if err != nil {
				return inputError("calibrate", err)
			}
			sets, refs, warn, opts := run.Sets, run.Refs, run.Warnings, run.Opts
			bar := newProgress(cmd, -1, "calibrating")
			opts.Progress = func(n int, _ float64) { bar.Set(n) }
			res, err := replay.Calibrate(sets, opts)
			bar.Finish()
			if err != nil {
				return inputError("calibrate", err)
			}
			a, err := res.Artifact(refs, run.FittedOn, strings.Join(os.Args, " "))
			if err != nil {
				return err
			}
			if err := a.Save(out); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			printCalib(cmd.OutOrStdout(), res, out, warn)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "model artifact to write (JSON)")
	forceFlag(cmd, &force)
	cmd.Flags().Float64Var(&holdout, "holdout", 0, "fraction of each dataset's requests (the last by arrival) held out and scored")
	cmd.Flags().StringArrayVar(&holdoutDirs, "holdout-dataset", nil, "dataset scored after the fit, not fitted (repeatable)")
	cmd.Flags().StringVar(&host, "host-model", "", "host-overhead model to start from (default: the start artifact's params.host, else the prior)")
	cmd.Flags().StringVar(&start, "start", "", "linear model artifact to start from (default: the run's prior, ops where a database prices it, else the roofline)")
	cmd.Flags().StringSliceVar(&terms, "terms", nil, "FPM terms that get a multiplier (default: every term of the start model)")
	cmd.Flags().StringSliceVar(&hostParams, "host", []string{replay.HostSchedUpdate, replay.HostPrep}, "host multipliers fitted (none for none)")
	cmd.Flags().StringSliceVar(&moeParams, "moe", replay.MoEParams, "expert-parallel multipliers fitted on a mixture of experts (none for none)")
	cmd.Flags().StringVar(&placement, "cluster", "", "placement file: what the manifest does not record (router, links, engine keys) or a what-if placement (pools) (docs/placement.md)")
	cmd.Flags().IntVar(&maxEvals, "max-evals", 0, "most replays of the datasets (default 60 per parameter, at least 150)")
	cmd.Flags().BoolVar(&noStepFit, "no-step-fit", false, "do not fit the FPM terms on the recorded steps first")
	cmd.Flags().Float64Var(&ridge, "ridge", 0, "weight of the ridge pulling the FPM terms' log-multipliers toward the step fit, else the start (default 1e6 toward a step fit: it holds the terms; 0.1 toward the start)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the calibration report as JSON")
	return cmd
}

// manifestOptions are the models and placement a recorded run is rebuilt
// with (usage errors exit 2).
func manifestOptions(fpModel, host, placement string) (scenario.ManifestOptions, error) {
	o := scenario.ManifestOptions{FPM: fpModel, Host: host}
	if placement != "" {
		s, err := scenario.LoadSpec(placement)
		if err != nil {
			return o, &exitError{code: 2, msg: "--cluster: " + err.Error()}
		}
		o.Spec = &s
	}
	return o, nil
}

func printCalib(w io.Writer, r *replay.CalibResult, out string, warn []string) {
	fmt.Fprintf(w, "calibrated %s in %d replays (%s), objective %.4g; wrote %s\n", r.Start, r.Evals, r.Status, r.Objective, out)
	fmt.Fprintf(w, "%s: %s\n", r.Status, r.Reason)
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	if r.Uncertainty != "" {
		fmt.Fprintf(w, "uncertainty: %s\n", r.Uncertainty)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "parameter\tstep fit\tmultiplier\tstart\tfitted\t")
	for _, p := range r.Params {
		step := "-"
		if p.StepFit > 0 {
			step = fmt.Sprintf("%.3f", p.StepFit)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.4g\t%.4g\t\n", p.Name, step, p.Multiplier, p.Start, p.Value)
	}
	tw.Flush()
	fmt.Fprintln(w)
	metrics := []string{"ttft_mean", "ttft_p50", "ttft_p90", "itl_mean", "itl_p50", "itl_p90", "e2e_mean"}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "relative error\tsplit\trequests\t")
	for _, m := range metrics {
		fmt.Fprintf(tw, "%s\t", m)
	}
	fmt.Fprintln(tw)
	rows := append(append(append(label(r.Before, "start"), label(r.StepFitted, "step-fit")...), r.Train...), r.Holdout...)
	for _, e := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t", shortName(e.Dataset), e.Split, e.Requests)
		for _, m := range metrics {
			fmt.Fprintf(tw, "%+.1f%%\t", 100*e.RelErr[m])
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	sort.Strings(warn)
	for _, m := range append(warn, r.Warnings...) {
		fmt.Fprintln(w, "warning:", m)
	}
}

func label(ms []replay.MetricErrors, split string) []replay.MetricErrors {
	out := make([]replay.MetricErrors, len(ms))
	for i, m := range ms {
		m.Split = split
		out[i] = m
	}
	return out
}

func shortName(p string) string {
	if i := strings.LastIndex(strings.TrimRight(p, "/"), "/"); i >= 0 {
		return p[i+1:]
	}
	return p
}
