package planner

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/cluster"
	"github.com/steplab/steplab/workflow/whatif"
)

// Constraints a candidate can be excluded by, in the order they are
// checked: the first four analytically, before any simulation.
const (
	ByMemory       = "memory"         // the weights or one request's KV do not fit (catalog.KVBlocks)
	ByGPUs         = "gpus"           // more GPUs than the offer has
	ByTTFTZeroLoad = "ttft_zero_load" // the prefill alone, on an idle engine, misses the TTFT objective
	ByITLBatch1    = "itl_batch1"     // one decode step alone misses the ITL objective
	ByThroughput   = "throughput"     // twice the prior's rate bound is short of the target rate
	BySLO          = "slo"            // simulated: the objectives fail at every rate tried
)

// Constraints lists them in order.
var Constraints = []string{ByMemory, ByGPUs, ByTTFTZeroLoad, ByITLBatch1, ByThroughput, BySLO}

// Config is what a candidate runs: enough to launch it.
type Config struct {
	Hardware            string       `json:"hardware"`
	Model               string       `json:"model"`
	TensorParallel      int          `json:"tensor_parallel"`
	WeightDType         string       `json:"weight_dtype,omitempty"`
	KVCacheDType        string       `json:"kv_cache_dtype,omitempty"`
	MaxNumSeqs          int          `json:"max_num_seqs"`
	MaxNumBatchedTokens int          `json:"max_num_batched_tokens"`
	Router              string       `json:"router"`
	Pools               []PoolConfig `json:"pools"`
}

// PoolConfig is one pool of a candidate.
type PoolConfig struct {
	Name           string `json:"name"`
	Role           string `json:"role"`
	Replicas       int    `json:"replicas"`
	ExpertParallel int    `json:"expert_parallel,omitempty"`
}

// Layout names the pools: agg×2, 1p2d, with EP8 when expert-parallel.
func (c Config) Layout() string {
	var s string
	if len(c.Pools) == 2 {
		s = fmt.Sprintf("%dp%dd", instances(c.Pools[0]), instances(c.Pools[1]))
	} else {
		s = fmt.Sprintf("agg×%d", instances(c.Pools[0]))
	}
	if ep := c.Pools[0].ExpertParallel; ep > 1 {
		s += fmt.Sprintf(" EP%d", ep)
	}
	return s
}

func instances(p PoolConfig) int { return p.Replicas / max(1, p.ExpertParallel) }

// Candidate is one configuration's outcome: excluded (Pruned names the
// constraint, Reason what it found) or simulated to the highest offered
// rate meeting the objectives.
type Candidate struct {
	Config      Config  `json:"config"`
	GPUs        int     `json:"gpus"`
	CostPerHour float64 `json:"cost_per_hour"`
	Pruned      string  `json:"pruned,omitempty"`
	Reason      string  `json:"reason,omitempty"`
	Bounds      *Bounds `json:"bounds,omitempty"`
	// GoodputRPS is the highest offered rate found that meets the SLO;
	// the rest are at that rate: per GPU, output tokens per second per
	// GPU, the price of a million output tokens and the latencies at the
	// SLO's percentile.
	GoodputRPS       float64 `json:"goodput_rps"`
	GoodputPerGPU    float64 `json:"goodput_rps_per_gpu"`
	TokensPerSPerGPU float64 `json:"output_tokens_per_s_per_gpu"`
	CostPerMTokens   float64 `json:"cost_per_million_output_tokens"`
	TTFTMs           float64 `json:"ttft_ms"`
	ITLMs            float64 `json:"itl_ms"`
	E2EMs            float64 `json:"e2e_ms"`
	// MeetsTarget: the goodput reaches the plan's target_rps (true when
	// there is none).
	MeetsTarget bool `json:"meets_target"`
	Simulations int  `json:"simulations"`
	// Scenario is the steplab scenario of the candidate at its goodput
	// rate (steplab simulate -f).
	Scenario string `json:"scenario,omitempty"`
}

// Feasible reports a simulated candidate that met the SLO at some rate.
func (c *Candidate) Feasible() bool { return c.Pruned == "" }

// Compile reads a candidate's document, refusing a plan that cannot be
// searched: a bad plan block, a GPU the offers lack.
func Compile(d *whatif.Doc) (*Doc, error) {
	pd, err := Decode(d)
	if err != nil {
		return nil, err
	}
	if _, ok := pd.Plan.offer(pd.Hardware); !ok {
		return nil, fmt.Errorf("%s: hardware %s is not among plan.gpus", d.Path, pd.Hardware)
	}
	return pd, nil
}

// Evaluate prunes or simulates the candidate of document d (its values
// set) and returns its outcome; an error is a configuration that is
// wrong, not one that does not fit.
func Evaluate(d *whatif.Doc, pd *Doc) (*Candidate, error) {
	c := &Candidate{Config: configOf(pd)}
	offer, _ := pd.Plan.offer(pd.Hardware)
	p, err := pd.Scenario.Plan()
	if errors.Is(err, catalog.ErrDoesNotFit) {
		return c.prune(ByMemory, err.Error()), nil
	} else if err != nil {
		return nil, err
	}
	c.GPUs = p.GPUs()
	c.CostPerHour = float64(c.GPUs) * offer.PricePerHour
	if c.GPUs > offer.Count {
		return c.prune(ByGPUs, fmt.Sprintf("needs %d %s, the offer has %d", c.GPUs, offer.Hardware, offer.Count)), nil
	}
	l, err := workloadLengths(p)
	if err != nil {
		return nil, err
	}
	slo, target := pd.Plan.SLO, pd.Plan.TargetRPS
	b := bounds(p.Plan, l, slo)
	c.Bounds = &b
	pct := slo.Percentile
	switch {
	case b.TTFTZeroLoadMs > slo.TTFTMs:
		return c.prune(ByTTFTZeroLoad, fmt.Sprintf("TTFT p%d at zero load is at least %.0f ms > %g ms", pct, b.TTFTZeroLoadMs, slo.TTFTMs)), nil
	case b.ITLBatch1Ms > slo.ITLMs:
		return c.prune(ByITLBatch1, fmt.Sprintf("ITL p%d at batch 1 is at least %.1f ms > %g ms", pct, b.ITLBatch1Ms, slo.ITLMs)), nil
	case target > 0 && 2*b.MaxRPS < target:
		return c.prune(ByThroughput, fmt.Sprintf("the prior bounds the rate at %.2f req/s, under half the target %g", b.MaxRPS, target)), nil
	}
	if !(b.MaxRPS > 0) || math.IsInf(b.MaxRPS, 1) {
		// A fitted FPM outside its data can price a step at zero or NaN.
		return nil, fmt.Errorf("the forward-pass model %s prices a mean request's steps at %g req/s: no rate to search from",
			p.Pools[0].Engine.FPMName, b.MaxRPS)
	}
	if err := c.search(p, pd.Plan, b.MaxRPS, l.meanOutput); err != nil {
		return nil, err
	}
	if c.Feasible() {
		c.MeetsTarget = c.GoodputRPS >= target
		if c.Scenario, err = scenarioAt(d, c.GoodputRPS); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Candidate) prune(by, why string) *Candidate {
	c.Pruned, c.Reason = by, why
	return c
}

// maxDoublings bounds how far past the prior's rate bound a search goes:
// the bound leaves out what mixed steps save.
const maxDoublings = 3

// MaxSimulations is the most simulations one candidate's search runs: at
// the bound, its doublings and the bisection steps.
func (p Spec) MaxSimulations() int { return 1 + maxDoublings + p.RateSteps }

// search bisects the offered rate between 0 and the prior's bound
// (doubling it, at most maxDoublings times, while it still meets the SLO)
// for the highest rate that meets the SLO.
func (c *Candidate) search(p *scenario.Plan, spec Spec, hi, meanOutput float64) error {
	var best *sim.Report
	lo, miss := 0.0, ""
	try := func(rate float64) (bool, error) {
		c.Simulations++
		res, err := scenario.Simulate(withRate(p, rate))
		if err != nil {
			return false, fmt.Errorf("at %.4g req/s: %w", rate, err)
		}
		if m := spec.SLO.miss(res.Report); m != "" {
			miss = fmt.Sprintf("at %.3g req/s, the lowest rate tried, %s", rate, m)
			return false, nil
		}
		lo, best = rate, &res.Report
		return true, nil
	}
	ok, err := try(hi)
	for i := 0; ok && i < maxDoublings; i++ {
		hi *= 2
		ok, err = try(hi)
	}
	if err != nil {
		return err
	}
	for i := 0; !ok && i < spec.RateSteps; i++ {
		mid := (lo + hi) / 2
		pass, err := try(mid)
		if err != nil {
			return err
		}
		if !pass {
			hi = mid
		}
	}
	if best == nil {
		c.prune(BySLO, miss)
		return nil
	}
	pct := spec.SLO.Percentile
	c.GoodputRPS, c.GoodputPerGPU = lo, lo/float64(c.GPUs)
	c.TokensPerSPerGPU = lo * meanOutput / float64(c.GPUs)
	c.CostPerMTokens = c.CostPerHour / (lo * meanOutput * 3600) * 1e6
	c.TTFTMs, c.ITLMs, c.E2EMs = at(best.TTFT, pct), at(best.ITL, pct), at(best.E2E, pct)
	return nil
}

// miss says which objective the report misses ("" when it meets them
// all). A run that did not keep up misses them all: an unfinished or
// rejected request, or an overload sign (sim.Report.Overload: preemption,
// a growing queue, a TTFT longer than the arrivals took), which tells a
// rate the engines sustain from a short workload's burst they absorb.
func (s SLO) miss(r sim.Report) string {
	if n := r.Unfinished + r.Rejected; n > 0 {
		return fmt.Sprintf("%d of %d requests did not finish", n, r.Requests)
	}
	if len(r.Overload) > 0 {
		return "overloaded: " + r.Overload[0]
	}
	var out []string
	for _, m := range []struct {
		name   string
		sum    sim.Summary
		target float64
	}{{"TTFT", r.TTFT, s.TTFTMs}, {"ITL", r.ITL, s.ITLMs}, {"E2E", r.E2E, s.E2EMs}} {
		if v := at(m.sum, s.Percentile); m.target > 0 && v > m.target {
			out = append(out, fmt.Sprintf("%s p%d %.1f ms > %g ms", m.name, s.Percentile, v, m.target))
		}
	}
	return strings.Join(out, ", ")
}

// at is the summary's percentile (50, 90 or 99).
func at(s sim.Summary, pct int) float64 {
	switch pct {
	case 50:
		return s.P50
	case 99:
		return s.P99
	}
	return s.P90
}

// withRate is the plan with its workload offered at rate: the same
// engines, a new workload spec.
func withRate(p *scenario.Plan, rate float64) *scenario.Plan {
	q := *p
	q.Scenario.Workload.RateRPS = rate
	return &q
}

// configOf is the candidate's configuration as its document states it.
func configOf(pd *Doc) Config {
	sc := pd.Scenario
	c := Config{Hardware: sc.Hardware, Model: sc.Model, TensorParallel: max(1, sc.TensorParallel), WeightDType: sc.WeightDType,
		KVCacheDType: sc.KVCacheDType, MaxNumSeqs: sc.Engine.MaxNumSeqs, MaxNumBatchedTokens: sc.Engine.MaxNumBatchedTokens,
		Router: sc.Cluster.Router.Name}
	if c.Router == "" {
		c.Router = cluster.RouterRoundRobin
	}
	for _, ps := range sc.Cluster.Pools {
		role := ps.Role
		if role == "" {
			role = cluster.RoleBoth
		}
		c.Pools = append(c.Pools, PoolConfig{Name: ps.Name, Role: role, Replicas: max(1, ps.Replicas), ExpertParallel: ps.ExpertParallel})
	}
	if len(c.Pools) == 0 {
		c.Pools = []PoolConfig{{Name: cluster.DefaultPool, Role: cluster.RoleBoth, Replicas: 1}}
	}
	return c
}

// scenarioAt is the candidate's document as a simulate scenario offered
// at rate: the plan block removed.
func scenarioAt(d *whatif.Doc, rate float64) (string, error) {
	s := d.Clone()
	if err := s.Set(fmt.Sprintf("workload.rate_rps=%.6g", rate)); err != nil {
		return "", err
	}
	b, err := s.YAML("plan")
	return "# a candidate of steplab plan at its goodput rate: steplab simulate -f FILE\n" + string(b), err
}
