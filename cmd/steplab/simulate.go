package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/internal/jobs"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
)

func init() { register(newSimulateCmd) }

func newSimulateCmd() *cobra.Command {
	var file, out string
	var sets []string
	var asJSON, force bool
	var seed uint64
	var level float64
	var njobs int
	cmd := &cobra.Command{
		Use:         "simulate [-f SCENARIO.yaml] -o DIR",
		Annotations: map[string]string{stopsOnCancel: ""},
		Short:       "Simulate a vLLM-style engine on a workload and write the dataset",
		Long: `simulate runs the deterministic engine model (scheduler, KV blocks, async
pipeline, simulated worker priced by a forward-pass model) on a workload and
writes a dataset: steps, step_requests and requests, with the provenance in
manifest.json. It prints TTFT, inter-token latency and end-to-end latency
percentiles, throughput, preemptions and steps per kind.

Without a scenario it replays the embedded Azure conversation trace (19,366
requests, one hour) on Llama-3.1-8B on one H200 with the roofline prior.
The same scenario and seed give a byte-identical dataset.

When the FPM has prediction intervals (a recipe, linear or grid artifact),
the workload is re-simulated twice more, with every step at the lower and
at the upper edge of its interval at --level, and the latencies are printed
with that interval (the dataset is the point model's).

A cluster block places engines: replicas behind a router, prefill and
decode pools with KV transfers, expert-parallel instances of a mixture of
experts (docs/placement.md). The dataset then holds every engine's steps
(worker_id, dp_rank), one row per request, and routes and transfers tables.

--jobs is the number of cores: the engine runs on one and the dataset's parts
are encoded on the others; the dataset does not depend on it.

Scenario files are YAML (see docs/scenarios.md); --set overrides any field.
From the repository root:

  steplab simulate -o out/azure-default
  steplab simulate -f examples/placement/qwen3-30b-a3b-rtxpro6000.yaml -o out/run --json
  steplab simulate -o out/p20 --set workload.kind=poisson --set workload.rate_rps=20 \
      --set workload.requests=2000 --set workload.prompt.kind=fixed --set workload.prompt.value=1024 \
      --set workload.output.kind=fixed --set workload.output.value=128
  steplab simulate -o out/sim-bench --set workload.kind=benchmark \
      --set workload.benchmark.policy=admission_step
  steplab simulate -o out/fitted --set fpm=datasets/h200/models/steady-gpu.json
  steplab simulate -o out/sim-ops --set fpm=ops          # measured-operations prior, docs/ops-prior.md
  steplab simulate -o out/azure-one-core --jobs 1         # engine and writer on one core

  # engines behind a router, and prefill/decode pools, on the first 2,000 requests
  steplab simulate -o out/sim-kv16 --set workload.limit=2000 \
      --set 'cluster.pools={sim: {replicas: 16}}' --set cluster.router.name=kv
  steplab simulate -o out/sim-pd --set workload.limit=2000 \
      --set 'cluster.pools={p: {role: prefill, replicas: 2}, d: {role: decode, replicas: 6}}' \
      --set 'cluster.links.kv_transfer={bandwidth_gbs: 50, latency_us: 20}'

  # an autoscaled pool on the Azure hour: GPU-hours, SLO attainment, replicas over time
  steplab simulate -f examples/placement/autoscale-azure.yaml -o out/sim-autoscale`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return &exitError{code: 2, msg: "simulate: no output directory: use -o DIR"}
			}
			n, err := jobs.Resolve(njobs)
			if err != nil {
				return &exitError{code: 2, msg: "simulate: " + err.Error()}
			}
			// The dataset's encoders run on the cores the engine leaves.
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n))
			plan, err := loadPlan(file, sets, cmd.Flags().Changed("seed"), seed, nil)
			if err != nil {
				return err
			}
			bar := newProgress(cmd, -1, "simulating")
			res, err := scenario.Run(plan, out, sim.RunOptions{Overwrite: force, Command: os.Args,
				Progress: func(n int64) { bar.Set64(n) }, Stop: cmd.Context().Done()})
			bar.Finish()
			if err != nil {
				return interrupted("simulate", out, err)
			}
			if l := plan.IntervalLevel(level); l > 0 {
				if res.Interval, err = scenario.Bounds(plan, l); err != nil {
					return err
				}
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			printReport(cmd.OutOrStdout(), res)
			if e := plan.Pools[0].Engine; level >= 0 && res.Interval == nil {
				if note := fpm.NoUncertainty(e.FPM, e.FPMName); note != "" {
					fmt.Fprintln(cmd.OutOrStdout(), note)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "scenario", "f", "", "YAML scenario file (defaults: the embedded Azure trace on Llama-3.1-8B/H200)")
	cmd.Flags().StringVarP(&out, "output", "o", "", "dataset directory to write")
	cmd.Flags().StringArrayVar(&sets, "set", nil, "override a scenario field, KEY=VALUE with a dotted path (repeatable)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "random seed of the workload")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing dataset")
	cmd.Flags().IntVar(&njobs, "jobs", 0, "cores to run on (0: every core, GOMAXPROCS); more than the machine has are clamped. The dataset does not depend on it")
	levelFlag(cmd, &level)
	return cmd
}

// interrupted turns a run stopped by a signal into exit code 130 and a
// message naming the partial dataset it left: at out, or, for a --force
// run that was to replace the dataset at out, at its staging name beside
// it (out is untouched; the next run into out removes it).
func interrupted(what, out string, err error) error {
	if !errors.Is(err, sim.ErrInterrupted) {
		return err
	}
	if staging := datasets.StagingPath(out, "replacing"); isDir(staging) {
		return &exitError{code: 130, msg: fmt.Sprintf("%s interrupted: %s keeps the previous dataset; the partial run is at %s (steplab validate %s)", what, out, staging, staging)}
	}
	return &exitError{code: 130, msg: fmt.Sprintf("%s interrupted: %s holds a partial dataset with every row recorded until then (steplab validate %s)", what, out, out)}
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// loadPlan reads a scenario (or the default), applies the overrides pre
// asks for (given the scenario as its file has it), then the --set
// overrides, and validates it; errors are usage errors (exit 2).
func loadPlan(path string, sets []string, seedSet bool, seed uint64, pre func(scenario.Scenario) []string) (*scenario.Plan, error) {
	sc, err := scenario.LoadWith(path, sets, pre)
	if err != nil {
		return nil, &exitError{code: 2, msg: err.Error()}
	}
	if seedSet {
		sc.Seed = seed
	}
	plan, err := sc.Plan()
	if err != nil {
		return nil, &exitError{code: 2, msg: "bad scenario: " + err.Error()}
	}
	return plan, nil
}

// loadEngine is loadPlan for a command that runs one engine (capture).
func loadEngine(path string, sets []string, seedSet bool, seed uint64, pre func(scenario.Scenario) []string) (*scenario.Plan, error) {
	p, err := loadPlan(path, sets, seedSet, seed, pre)
	if err != nil {
		return nil, err
	}
	if p.Engines() != 1 {
		return nil, &exitError{code: 2, msg: fmt.Sprintf("bad scenario: the cluster block places %d engines; a capture drives one worker: remove it", p.Engines())}
	}
	return p, nil
}

func printReport(w io.Writer, r *sim.Result) {
	fmt.Fprintf(w, "dataset %s\n", r.Dataset)
	fmt.Fprintf(w, "requests %d: %d finished, %d unfinished, %d rejected; %d preemptions; %.1f s of engine time\n",
		r.Requests, r.Finished, r.Unfinished, r.Rejected, r.Preemptions, r.DurationS)
	fmt.Fprintf(w, "throughput %.2f req/s, %.0f output tok/s; prefix cache hits %.1f%% of prompt tokens\n\n", r.RequestsPerS, r.OutputTokensPerS,
		100*r.PrefixCacheHitRate)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency (ms)\tmean\tp50\tp90\tp99\tmax\t")
	iv := r.Interval
	for _, row := range []struct {
		name string
		s    sim.Summary
		b    func(*sim.LatencyInterval) sim.Bounded
	}{{"TTFT", r.TTFT, func(l *sim.LatencyInterval) sim.Bounded { return l.TTFT }},
		{"ITL", r.ITL, func(l *sim.LatencyInterval) sim.Bounded { return l.ITL }},
		{"E2E", r.E2E, func(l *sim.LatencyInterval) sim.Bounded { return l.E2E }}} {
		if iv == nil {
			fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", row.name, row.s.Mean, row.s.P50, row.s.P90, row.s.P99, row.s.Max)
			continue
		}
		b := row.b(iv)
		fmt.Fprintf(tw, "%s\t%.2f [%.2f, %.2f]\t%.2f [%.2f, %.2f]\t%.2f [%.2f, %.2f]\t%.2f [%.2f, %.2f]\t%.2f [%.2f, %.2f]\t\n", row.name,
			row.s.Mean, b.Lo.Mean, b.Hi.Mean, row.s.P50, b.Lo.P50, b.Hi.P50, row.s.P90, b.Lo.P90, b.Hi.P90,
			row.s.P99, b.Lo.P99, b.Hi.P99, row.s.Max, b.Lo.Max, b.Hi.Max)
	}
	tw.Flush()
	if iv != nil {
		fmt.Fprintf(w, "[lo, hi]: %.0f%% interval, %s\n", 100*iv.Level, iv.Method)
	}
	kinds := make([]string, 0, len(r.Steps))
	for k := range r.Steps {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	fmt.Fprint(w, "\nsteps:")
	for _, k := range kinds {
		fmt.Fprintf(w, " %s %d", k, r.Steps[k])
	}
	fmt.Fprintln(w)
	printService(w, r.Service)
	for _, n := range r.Overload {
		fmt.Fprintln(w, "warning: overloaded:", n)
	}
	if n := sim.ExtrapolatedNote(r.ExtrapolatedOps); n != "" {
		fmt.Fprintln(w, "warning:", n)
	}
}

// printService prints a cluster run's GPU-hours, its SLO attainment and
// each autoscaled pool's replicas over the run.
func printService(w io.Writer, s *sim.Service) {
	if s == nil {
		return
	}
	fmt.Fprintf(w, "GPU-hours %.3f", s.GPUHours)
	if o := s.SLO; o != nil {
		fmt.Fprintf(w, "; SLO (TTFT <= %g ms, ITL <= %g ms) met by %d of %d requests (%.2f%%)", o.TTFTMs, o.ITLMs, o.Met, o.Requests, 100*o.Attainment)
	}
	fmt.Fprintln(w)
	for _, a := range s.Autoscaled {
		lo, hi, ups, downs := a.MaxReplicas, 0, 0, 0
		for _, e := range a.Timeline {
			lo, hi = min(lo, e.Serving), max(hi, e.Serving)
			switch e.Event {
			case "start":
				ups++
			case "drain":
				downs++
			}
		}
		fmt.Fprintf(w, "pool %s autoscaled (%s): %d-%d routable engines, %d started, %d drained, %.3f GPU-hours (timeline: manifest.json cluster.pools[].autoscale)\n",
			a.Pool, a.Policy, lo, hi, ups, downs, a.GPUHours)
	}
}
