package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync/atomic"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/steplab/steplab/planner"
	"github.com/steplab/steplab/sweep"
	"github.com/steplab/steplab/sweep/dist"
	"github.com/steplab/steplab/workflow/whatif"
)

func init() { register(newPlanCmd) }

// planOpts are plan's flags.
type planOpts struct {
	out                 string
	force, asJSON       bool
	sets                []string
	jobs, maxCandidates int
	dist                sweepDist
}

func newPlanCmd() *cobra.Command {
	var o planOpts
	cmd := &cobra.Command{
		Use:   "plan PLAN.yaml -o DIR [--max-candidates N] [--queue nats://HOST:PORT]",
		Short: "Search placements for a service level with the simulator",
		Long: `plan searches the placements of a plan file (docs/planning.md): a simulate
scenario (model, engine, workload, router) with a plan block of objectives
(TTFT and ITL at a percentile, optional E2E), GPU types with counts and
prices, and a search space (tensor and expert parallelism, agg or xPyD
pools, replicas, max_num_seqs, max_num_batched_tokens, KV-cache and weight
dtypes). Each candidate is pruned analytically (memory fit, TTFT at zero
load, ITL at batch 1, a throughput bound) or simulated with its router at
rates bisected to the highest that meets the objectives; candidates run in
parallel, or over a NATS JetStream queue as a sweep's points do.

It writes to DIR:
  sweep.parquet, sweep.json   one row per candidate (the searched keys as
                              columns): its exclusion or goodput, cost, latencies
  plan.json                   exclusions by constraint, the Pareto frontier, the choice
  frontier.png, .svg          output tokens/s per GPU against ITL
  cost.png, .svg              $ per million output tokens against ITL
  chosen/                     vllm_args.txt, dynamo_graph.yaml and scenario.yaml
                              (steplab simulate -f) of the chosen configuration

Examples, from the repository root:
  # Llama-3.1-8B on H100 or H200, agg or 1p1d, on 200 requests of the Azure trace
  steplab plan examples/plan/llama8b-azure.yaml -o out/plan-8b

  # the same at a tighter ITL, bounded to 50 candidates
  steplab plan examples/plan/llama8b-azure.yaml -o out/plan-8b-itl --set plan.slo.itl_ms=15 --max-candidates 50`,
		Args: cobra.ExactArgs(1),
		RunE: o.run,
	}
	f := cmd.Flags()
	f.StringVarP(&o.out, "output", "o", "", "output directory")
	forceFlag(cmd, &o.force)
	f.StringArrayVar(&o.sets, "set", nil, "override a key of the plan file: KEY=VALUE (repeatable)")
	f.BoolVar(&o.asJSON, "json", false, "print the summary and every candidate as JSON")
	f.IntVar(&o.jobs, "jobs", runtime.GOMAXPROCS(0), "candidates simulated at once (results do not depend on it)")
	f.IntVar(&o.maxCandidates, "max-candidates", 1000, "refuse a search space of more candidates than this (0: no bound)")
	o.dist.flags(f)
	return cmd
}

// run plans the file args[0]: locally, or over the queue.
func (o *planOpts) run(cmd *cobra.Command, args []string) error {
	if o.dist.emit != "" || o.dist.merge != "" || o.dist.point >= 0 {
		return &exitError{code: 2, msg: "plan: of the distributed modes, plan runs --queue; for an Indexed Job use steplab sweep on the plan file with its keys"}
	}
	d, err := loadScenarioDoc(args[0], o.sets)
	if err != nil {
		return err
	}
	pd, err := planner.Decode(d)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	var vs []sweep.Vary
	n := 1
	for _, a := range pd.Plan.Axes() {
		vs = append(vs, sweep.Vary{Key: a.Key, Values: a.Values})
		n *= len(a.Values)
	}
	if o.maxCandidates > 0 && n > o.maxCandidates {
		return &exitError{code: 2, msg: fmt.Sprintf("plan: the search space has %d candidates, over --max-candidates %d: narrow plan.space or raise the bound", n, o.maxCandidates)}
	}
	var res *sweep.Result
	if o.dist.queue.url != "" {
		b, err := os.ReadFile(args[0])
		if err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
		if res, err = o.dist.runQueue(cmd, dist.SpecFromFile(args[0], b, o.sets, vs), n, o.out, o.force, o.asJSON); err != nil || o.asJSON {
			return err
		}
	} else {
		if err := refuseExistingDir("plan", o.out, o.force, sweep.JSONFile); err != nil {
			return err
		}
		if res, err = runPlan(cmd, d, vs, n, o.jobs); err != nil {
			return err
		}
		if err := sweep.Write(o.out, res); err != nil {
			return err
		}
	}
	s := planner.Summarise(res.Candidates())
	if o.asJSON {
		return writeJSON(cmd.OutOrStdout(), struct {
			Summary    planner.Summary
			Candidates []*planner.Candidate
		}{s, res.Candidates()})
	}
	printPlan(cmd.OutOrStdout(), res, s)
	fmt.Fprintf(cmd.OutOrStdout(), "\nwrote %s (sweep.parquet, sweep.json, plan.json, frontier.png/.svg, cost.png/.svg%s)\n", o.out,
		map[bool]string{true: ", chosen/"}[s.Chosen >= 0])
	if s.Chosen < 0 {
		return &exitError{code: 1, msg: "plan: " + s.Why}
	}
	return nil
}

// runPlan runs the candidates locally, the progress saying how many are
// done, pruned and remaining.
func runPlan(cmd *cobra.Command, d *whatif.Doc, vs []sweep.Vary, n, jobs int) (*sweep.Result, error) {
	bar := newProgress(cmd, int64(n), "candidates")
	var done, pruned atomic.Int64
	res, err := sweep.Run(d, vs, sweep.Options{Jobs: jobs, Point: func(p sweep.PointResult) {
		k := done.Add(1)
		if p.Plan.Simulations == 0 {
			pruned.Add(1)
		}
		bar.Describe(fmt.Sprintf("candidates: %d done, %d pruned, %d remaining", k, pruned.Load(), int64(n)-k))
		_ = bar.Set64(k)
	}})
	bar.Finish()
	if err != nil {
		return nil, &exitError{code: 2, msg: err.Error()}
	}
	slog.Info("candidates", "done", done.Load(), "pruned before simulating", pruned.Load(), "remaining", 0)
	return res, nil
}

// printPlan prints the exclusions, the feasible candidates (frontier and
// choice marked) and the chosen launch settings.
func printPlan(w io.Writer, res *sweep.Result, s planner.Summary) {
	cs := res.Candidates()
	fmt.Fprintf(w, "%d candidates: %d simulated, %d feasible", s.Candidates, s.Simulated, s.Feasible)
	for _, e := range s.Excluded {
		fmt.Fprintf(w, "; %s %d", e.Constraint, e.Count)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\npoint\thardware\tlayout\tTP\tweights/KV\tseqs/tokens\tGPUs\tgoodput req/s\ttok/s/GPU\t$/Mtok\tTTFT ms\tITL ms\t\t")
	onFrontier := map[int]bool{}
	for _, i := range s.Frontier {
		onFrontier[i] = true
	}
	for i, c := range cs {
		if !c.Feasible() {
			continue
		}
		mark := ""
		if onFrontier[i] {
			mark = "frontier"
		}
		if i == s.Chosen {
			mark += " chosen"
		}
		k := c.Config
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s/%s\t%d/%d\t%d\t%.2f\t%.0f\t%.3f\t%.0f\t%.1f\t%s\t\n", i, k.Hardware, k.Layout(), k.TensorParallel,
			orAuto(k.WeightDType), orAuto(k.KVCacheDType), k.MaxNumSeqs, k.MaxNumBatchedTokens, c.GPUs, c.GoodputRPS,
			c.TokensPerSPerGPU, c.CostPerMTokens, c.TTFTMs, c.ITLMs, mark)
	}
	tw.Flush()
	for _, n := range s.Notes {
		fmt.Fprintln(w, "note: "+n)
	}
	if s.Chosen < 0 {
		return
	}
	fmt.Fprintf(w, "\nchosen: candidate %d\n", s.Chosen)
	for _, l := range cs[s.Chosen].Config.VLLMArgs() {
		fmt.Fprintln(w, "  "+l)
	}
}

func orAuto(s string) string {
	if s == "" {
		return "auto"
	}
	return s
}
