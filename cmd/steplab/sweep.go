package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/steplab/steplab/planner"
	"github.com/steplab/steplab/replay"
	"github.com/steplab/steplab/sweep"
)

func init() { register(newSweepCmd) }

func newSweepCmd() *cobra.Command {
	var out string
	var force bool
	var sets, varies []string
	var asJSON bool
	var jobs int
	var dist sweepDist
	cmd := &cobra.Command{
		Use:   "sweep SCENARIO.yaml --vary KEY=V1,V2,... [--vary ...] -o DIR [--queue nats://HOST:PORT | --emit k8s-indexed-job | --point N]",
		Short: "Run a what-if scenario over a grid of values, in parallel",
		Long: `sweep runs a what-if scenario (see steplab whatif) at every point of the
cartesian grid of the --vary values (the first --vary changes slowest),
points in parallel across cores. Each point is the scenario with its values
set, as --set would, and a seed derived from the scenario's seed and the
point's index, so the results are the same on 1 or many cores.

It writes to DIR:
  sweep.parquet               one row per point × placement × repetition: the
                              varied values as columns (named by key), then
                              throughput (request window, full process),
                              achieved/offered, errors and latency percentiles
  sweep.json                  every point's full audit
  throughput.png, .svg        mean request-window throughput against offered
                              load, one line per placement
  latency_p90.png, .svg       mean p90 end-to-end latency against offered load

Examples, from the repository root:
  # where does the encoder ensemble saturate, join inline vs remote?
  steplab sweep examples/whatif/encoder-ensemble.yaml -o out/sweep-grid \
      --vary load.rate_rps=10,25,40,50,60,70,80

  # rate × engine batch limit, quicker with 300 measured requests
  steplab sweep examples/whatif/encoder-ensemble.yaml -o out/grid \
      --set load.requests=300 \
      --vary load.rate_rps=30,50,70 --vary stages.generator.engine.limits.max_num_seqs=16,64,256

  # closed loop: x axis is the number of users
  steplab sweep examples/whatif/encoder-ensemble.yaml -o out/closed \
      --set load.kind=closed --vary load.users=1,4,16,64

Across machines (docs/distributed.md):
  # points on a NATS JetStream work queue; run steplab worker anywhere
  # needs: network (a NATS server with JetStream at nats.example:4222)
  steplab sweep examples/whatif/encoder-ensemble.yaml --vary load.rate_rps=10,40 -o out/sweep-q \
      --queue tls://nats.example:4222 --tls-ca ca.pem --creds submitter.creds --results /shared/parts

  # a pool of worker pods whose NATS identity is the Secret steplab-nats
  steplab sweep --emit k8s-workers --queue tls://nats.example:4222 --tls-ca ca.pem --parallelism 8 > out/workers-job.yaml

  # a Kubernetes Indexed Job: one pod per point, then a merge
  steplab sweep examples/whatif/encoder-ensemble.yaml --vary load.rate_rps=10,40 \
      --emit k8s-indexed-job --parallelism 16 > sweep-job.yaml
  # the same by hand, on any batch system: each point's part, then the parts into sweep.parquet
  steplab sweep examples/whatif/encoder-ensemble.yaml --vary load.rate_rps=10,40 --point 0 --results out/sweep-parts
  steplab sweep examples/whatif/encoder-ensemble.yaml --vary load.rate_rps=10,40 --point 1 --results out/sweep-parts
  steplab sweep --merge out/sweep-parts -o out/sweep-merged`,
		Args: cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("point") && dist.point < 0 {
				return &exitError{code: 2, msg: fmt.Sprintf("--point %d: a point index is 0 or more", dist.point)}
			}
			if dist.active() {
				return dist.run(cmd, args, sets, varies, out, force, asJSON)
			}
			if len(args) != 1 {
				return &exitError{code: 2, msg: "sweep: give the scenario file"}
			}
			vs, err := parseVaries(varies)
			if err != nil {
				return err
			}
			d, err := loadScenarioDoc(args[0], sets)
			if err != nil {
				return err
			}
			if err := refuseExistingDir("sweep", out, force, sweep.JSONFile); err != nil {
				return err
			}
			bar := newProgress(cmd, int64(len(sweep.Grid(vs))), "sweep points")
			res, err := sweep.Run(d, vs, sweep.Options{Jobs: jobs, Progress: func(done, total int) { bar.Set(done) }})
			bar.Finish()
			if err != nil {
				return &exitError{code: 2, msg: err.Error()}
			}
			if err := sweep.Write(out, res); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			w := cmd.OutOrStdout()
			printSweep(w, res)
			fmt.Fprintf(w, "\nwrote %s (%s)\n", out, sweepFiles(res.Kind))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "output directory")
	forceFlag(cmd, &force)
	f.StringArrayVar(&varies, "vary", nil, "a key and its values: KEY=V1,V2,... (repeatable; the grid is their product)")
	f.StringArrayVar(&sets, "set", nil, "override a scenario key for every point: KEY=VALUE (repeatable)")
	f.BoolVar(&asJSON, "json", false, "print every point's audit as JSON")
	f.IntVar(&jobs, "jobs", runtime.GOMAXPROCS(0), "points simulated at once (results do not depend on it)")
	dist.flags(f)
	return cmd
}

// sweepFiles names the files a sweep of kind writes.
func sweepFiles(kind string) string {
	files := "sweep.parquet, sweep.json"
	switch kind {
	case "":
		files += ", throughput.png/.svg, latency_p90.png/.svg"
	case sweep.KindPlan:
		files += ", plan.json, frontier.png/.svg, cost.png/.svg, chosen/ (when a candidate was chosen)"
	}
	return files
}

// parseVaries reads the --vary flags (usage errors exit 2).
func parseVaries(varies []string) ([]sweep.Vary, error) {
	if len(varies) == 0 {
		return nil, &exitError{code: 2, msg: "sweep: nothing to vary: give --vary KEY=V1,V2,..."}
	}
	var vs []sweep.Vary
	for _, s := range varies {
		v, err := sweep.ParseVary(s)
		if err != nil {
			return nil, &exitError{code: 2, msg: err.Error()}
		}
		vs = append(vs, v)
	}
	return vs, nil
}

// printSweep prints one line per point (and placement) of a sweep of any
// kind.
func printSweep(w io.Writer, res *sweep.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var notes []string // why points have no latency interval, each once
	defer func() {
		tw.Flush()
		for _, n := range notes {
			fmt.Fprintln(w, "[lo, hi] -:", n)
		}
	}()
	header := "point\t"
	for _, v := range res.Vary {
		header += v.Key + "\t"
	}
	values := func(p sweep.PointResult) string {
		row := fmt.Sprintf("%d\t", p.Index)
		for _, x := range p.Values {
			row += x + "\t"
		}
		return row
	}
	switch res.Kind {
	case sweep.KindSimulate:
		fmt.Fprintln(tw, header+"gpus\tfinished\treq/s\tTTFT p50 / p90 ms\tITL p50 / p90 ms\tE2E p90 ms\tE2E p90 [lo, hi]\tprefix hits\t")
		for _, p := range res.Points {
			s := p.Simulate
			iv, note := "-", s.NoUncertainty
			if s.Interval != nil {
				iv = fmt.Sprintf("[%.0f, %.0f]", s.Interval.E2E.Lo.P90, s.Interval.E2E.Hi.P90)
			}
			notes = appendNote(notes, note)
			fmt.Fprintf(tw, "%s%d\t%d\t%.2f\t%.1f / %.1f\t%.2f / %.2f\t%.0f\t%s\t%.1f%%\t\n", values(p), s.GPUs, s.Finished, s.RequestsPerS,
				s.TTFT.P50, s.TTFT.P90, s.ITL.P50, s.ITL.P90, s.E2E.P90, iv, 100*s.PrefixCacheHitRate)
		}
	case sweep.KindPlan:
		printPlan(w, res, planner.Summarise(res.Candidates()))
	case sweep.KindCalibrate:
		fmt.Fprintln(tw, header+"split\tobjective\tTTFT mean\tITL mean\tE2E mean\t")
		for _, p := range res.Points {
			c := p.Calibrate
			for _, m := range append(append([]replay.MetricErrors(nil), c.Train...), c.Holdout...) {
				fmt.Fprintf(tw, "%s%s\t%.4g\t%+.1f%%\t%+.1f%%\t%+.1f%%\t\n", values(p), m.Split, c.Objective,
					100*m.RelErr["ttft_mean"], 100*m.RelErr["itl_mean"], 100*m.RelErr["e2e_mean"])
			}
		}
	default:
		fmt.Fprintln(tw, header+"placement\twindow req/s\tachieved/offered\tfull-process req/s\tp90 ms\tp90 [lo, hi]\terrors\tcancelled\tgoodput/GPU\t")
		for _, p := range res.Points {
			notes = appendNote(notes, p.Audit.NoUncertainty)
			for _, pl := range p.Audit.Placements {
				iv := "-"
				if pl.Interval != nil {
					iv = fmt.Sprintf("[%.1f, %.1f]", pl.Interval.E2E.Lo.P90Ms, pl.Interval.E2E.Hi.P90Ms)
				}
				ao := "n/a"
				if p.Audit.OfferedRPS > 0 {
					ao = fmt.Sprintf("%.2f%%", pl.AchievedOverOffered*100)
				}
				goodput := "-"
				if pl.GoodputPerGPU != nil {
					goodput = fmt.Sprintf("%.3f", *pl.GoodputPerGPU)
				}
				fmt.Fprintf(tw, "%s%s\t%.3f\t%s\t%.3f\t%.1f\t%s\t%d\t%d\t%s\t\n", values(p), pl.Placement, pl.WindowMeanRPS, ao,
					pl.FullProcessMeanRPS, pl.E2E.P90Ms, iv, pl.Errors, pl.Cancelled, goodput)
			}
		}
		if len(res.Points) > 0 && res.Points[0].Audit.SLO == nil {
			tw.Flush()
			fmt.Fprintln(w, "goodput/GPU -: goodput counts the requests that meet an SLO, and the scenario sets none; give one with --set slo.ttft_ms=500 --set slo.itl_ms=50 (or an slo: block in the scenario)")
		}
	}
}

// appendNote adds a non-empty note not yet in notes.
func appendNote(notes []string, n string) []string {
	if n == "" || slices.Contains(notes, n) {
		return notes
	}
	return append(notes, n)
}
