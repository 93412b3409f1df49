package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/model"
	"github.com/steplab/steplab/replay"
	"github.com/steplab/steplab/sim"
)

func init() { register(newCalibrateCmd) }

func newCalibrateCmd() *cobra.Command {
	var out, start, host string
	var holdoutDirs, terms, hostParams []string
	var holdout float64
	var maxEvals int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "calibrate DATASET... -o model.json",
		Short: "Fit FPM and host-overhead multipliers so that re-simulated requests match the record",
		Long: `calibrate fits a small parameter vector — a multiplier on each coefficient of a
linear FPM and on the host model's fixed costs between steps (schedule() +
update_from_output(), worker input preparation) — so that the recorded
requests, re-simulated on each dataset's engine (as replay requests does),
match the record: mean, p50 and p90 of TTFT and ITL and mean E2E. It
minimises Σ log(predicted/recorded)² by a coarse coordinate search then
Nelder-Mead over the log-multipliers: deterministic, a bounded number of
replays (--max-evals).

The start model is --start (a linear artifact), else the roofline prior of
the first dataset's hardware and model shape linearised into const,
prefill_tokens, prefill_attn, decode_requests and decode_kv_tokens.

Hold-outs: --holdout F keeps the last fraction F of each dataset's requests
(by arrival) out of the fit and scores them after it, re-simulating the whole
run; --holdout-dataset DIR scores whole runs that were not fitted.

The artifact is a linear model (model.Save); the fitted host model is in its
params.host, which replay and simulate-by-replay read back; the fit report
is in its metrics.

Examples:
  steplab import vllm-requests runs/rtxpro6000-llama -o ds/llama
  steplab calibrate ds/llama -o llama-cal.json --holdout 0.3
  steplab calibrate ds/run1 ds/run2 -o cal.json --holdout-dataset ds/run3
  steplab calibrate ds/llama -o cal.json --terms const,decode_kv_tokens --host host.prep_fixed
  steplab replay requests llama-cal.json ds/llama -o out/rr`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return &exitError{code: 2, msg: "calibrate: no output file: use -o model.json"}
			}
			if holdout > 0 && len(holdoutDirs) > 0 {
				return &exitError{code: 2, msg: "calibrate: use --holdout or --holdout-dataset, not both"}
			}
			spec := sim.ManifestOptions{FPM: start, Host: host}
			sets, refs, warn, err := calibSets(args, spec)
			if err != nil {
				return err
			}
			hsets, _, hwarn, err := calibSets(holdoutDirs, spec)
			if err != nil {
				return err
			}
			warn = append(warn, hwarn...)
			p := sets[0].Plan
			opts := replay.CalibOptions{Host: p.Host, Holdout: holdout, HoldoutSets: hsets, MaxEvals: maxEvals}
			if start != "" {
				lin, ok := p.FPM.(*model.Linear)
				if !ok {
					return &exitError{code: 2, msg: "calibrate: --start must be a linear artifact (steplab fit --form linear)"}
				}
				opts.Start = lin
			} else {
				r, err := p.Roofline()
				if err != nil {
					return &exitError{code: 2, msg: "calibrate: no --start and no roofline prior for " + args[0] + ": " + err.Error()}
				}
				opts.Start = r.Linear()
			}
			if len(terms) > 0 {
				opts.Terms = terms
			}
			if cmd.Flags().Changed("host") {
				opts.HostParams = []string{}
				for _, h := range hostParams {
					if h != "" && h != "none" {
						opts.HostParams = append(opts.HostParams, h)
					}
				}
			}
			bar := newProgress(-1, "calibrating")
			opts.Progress = func(n int, _ float64) { bar.Set(n) }
			res, err := replay.Calibrate(sets, opts)
			bar.Finish()
			if err != nil {
				return &exitError{code: 2, msg: err.Error()}
			}
			a, err := res.Artifact(refs, strings.Join(os.Args, " "))
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
	cmd.Flags().Float64Var(&holdout, "holdout", 0, "fraction of each dataset's requests (the last by arrival) held out and scored")
	cmd.Flags().StringArrayVar(&holdoutDirs, "holdout-dataset", nil, "dataset scored after the fit, not fitted (repeatable)")
	cmd.Flags().StringVar(&host, "host-model", "", "host-overhead model to start from (default: the start artifact's params.host, else the prior)")
	cmd.Flags().StringVar(&start, "start", "", "linear model artifact to start from (default: the linearised roofline prior)")
	cmd.Flags().StringSliceVar(&terms, "terms", nil, "FPM terms that get a multiplier (default: every term of the start model)")
	cmd.Flags().StringSliceVar(&hostParams, "host", []string{replay.HostSchedUpdate, replay.HostPrep}, "host multipliers fitted (none for none)")
	cmd.Flags().IntVar(&maxEvals, "max-evals", 0, "most replays of the datasets (default 60 per parameter, at least 150)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the calibration report as JSON")
	return cmd
}

func calibSets(dirs []string, spec sim.ManifestOptions) ([]replay.CalibSet, []model.DatasetRef, []string, error) {
	var sets []replay.CalibSet
	var refs []model.DatasetRef
	var warn []string
	for _, dir := range dirs {
		d, err := datasets.Open(dir)
		if err != nil {
			return nil, nil, nil, &exitError{code: 2, msg: err.Error()}
		}
		tr, err := replay.LoadTrace(d)
		if err != nil {
			return nil, nil, nil, &exitError{code: 2, msg: err.Error()}
		}
		p, pw, err := sim.PlanFromManifest(d.Manifest, spec)
		if err != nil {
			return nil, nil, nil, &exitError{code: 2, msg: dir + ": " + err.Error()}
		}
		for _, w := range pw {
			warn = append(warn, dir+": "+w)
		}
		sets = append(sets, replay.CalibSet{Name: dir, Trace: tr, Plan: p})
		ref := model.DatasetRef{ID: dir, Path: dir, Rows: int64(len(tr.Rec))}
		if d.Manifest != nil {
			ref.SHA256 = d.Manifest.Source.SHA256
		}
		refs = append(refs, ref)
	}
	return sets, refs, warn, nil
}

func printCalib(w io.Writer, r *replay.CalibResult, out string, warn []string) {
	fmt.Fprintf(w, "calibrated in %d replays (%s), objective %.4g; wrote %s\n", r.Evals, r.Status, r.Objective, out)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "parameter\tmultiplier\tstart\tfitted\t")
	for _, p := range r.Params {
		fmt.Fprintf(tw, "%s\t%.3f\t%.4g\t%.4g\t\n", p.Name, p.Multiplier, p.Start, p.Value)
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
	rows := append(append(label(r.Before, "start"), r.Train...), r.Holdout...)
	for _, e := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t", shortName(e.Dataset), e.Split, e.Requests)
		for _, m := range metrics {
			fmt.Fprintf(tw, "%+.1f%%\t", 100*e.RelErr[m])
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	sort.Strings(warn)
	for _, m := range warn {
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
