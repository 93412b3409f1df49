package planner

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim/cluster"
	"github.com/steplab/steplab/workflow/whatif"
)

// Spec is a plan file's plan block: the objectives, the GPUs on offer, the
// space to search and how finely.
type Spec struct {
	SLO  SLO     `yaml:"slo"`
	GPUs []Offer `yaml:"gpus"`
	// TargetRPS, when set, is the rate the chosen configuration must serve
	// within the SLO; 0: the cheapest per token, at any rate.
	TargetRPS float64 `yaml:"target_rps"`
	// RateSteps is the number of bisection steps on the rate per
	// candidate (default 6: the goodput to 1/64 of the prior's bound).
	RateSteps int   `yaml:"rate_steps"`
	Space     Space `yaml:"space"`
}

// SLO is the service level: TTFT and ITL (required) and end-to-end latency
// (optional, 0: none) at a percentile of the requests.
type SLO struct {
	// Percentile: 50, 90 or 99 (the simulator's report; default 90).
	Percentile int     `yaml:"percentile"`
	TTFTMs     float64 `yaml:"ttft_ms"`
	ITLMs      float64 `yaml:"itl_ms"`
	E2EMs      float64 `yaml:"e2e_ms"`
}

// Offer is a GPU type on offer: a catalogue name or a hardware spec file,
// how many there are and their price per GPU-hour.
type Offer struct {
	Hardware     string  `yaml:"hardware"`
	Count        int     `yaml:"count"`
	PricePerHour float64 `yaml:"price_per_hour"`
}

// Space is the search space. A list left empty keeps the scenario's own
// value (not searched).
type Space struct {
	TensorParallel []int `yaml:"tensor_parallel"`
	// ExpertParallel groups that many engines into one instance sharing
	// the routed experts, each engine a data-parallel attention rank
	// (vLLM's data_parallel_size with enable_expert_parallel): expert
	// parallelism with DP attention. 1: no expert parallelism.
	ExpertParallel []int `yaml:"expert_parallel"`
	// Layouts: agg (one pool of role both) or xPyD (x prefill and y decode
	// engines, or instances with expert parallelism: 1p2d).
	Layouts []string `yaml:"layouts"`
	// Replicas are copies of a layout: agg engines (instances, with expert
	// parallelism), or xPyD units (2 of 1p2d: 2 prefill, 4 decode).
	Replicas            []int    `yaml:"replicas"`
	MaxNumSeqs          []int    `yaml:"max_num_seqs"`
	MaxNumBatchedTokens []int    `yaml:"max_num_batched_tokens"`
	KVCacheDType        []string `yaml:"kv_cache_dtype"`
	WeightDType         []string `yaml:"weight_dtype"`
}

// Doc is a plan file: a simulate scenario (its cluster block's router and
// links, its engine, model and workload) and the plan block.
type Doc struct {
	scenario.Scenario `yaml:",inline"`
	Plan              Spec `yaml:"plan"`
}

// Decode reads a plan document (a sweep point's, its values set) over
// simulate's defaults and checks its plan block.
func Decode(d *whatif.Doc) (*Doc, error) {
	pd := &Doc{Scenario: scenario.Default()}
	if err := d.Decode(pd); err != nil {
		return nil, err
	}
	if err := pd.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", d.Path, err)
	}
	if pd.Plan.SLO.Percentile == 0 {
		pd.Plan.SLO.Percentile = 90
	}
	if pd.Plan.RateSteps == 0 {
		pd.Plan.RateSteps = 6
	}
	return pd, nil
}

// check refuses a plan that cannot be searched, every fault at once.
func (pd *Doc) check() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	p := pd.Plan
	switch p.SLO.Percentile {
	case 0, 50, 90, 99:
	default:
		bad("plan.slo.percentile is %d: the simulator reports 50, 90 and 99", p.SLO.Percentile)
	}
	for _, m := range []struct {
		key string
		v   float64
		opt bool
	}{{"ttft_ms", p.SLO.TTFTMs, false}, {"itl_ms", p.SLO.ITLMs, false}, {"e2e_ms", p.SLO.E2EMs, true}} {
		if m.v < 0 || (m.v == 0 && !m.opt) {
			bad("plan.slo.%s is %g: give a latency > 0 ms", m.key, m.v)
		}
	}
	if len(p.GPUs) == 0 {
		bad("plan.gpus: name at least one GPU type ({hardware: H100-SXM, count: 16, price_per_hour: 2.5})")
	}
	seen := map[string]bool{}
	for i, g := range p.GPUs {
		at := fmt.Sprintf("plan.gpus[%d] (%s)", i, g.Hardware)
		switch {
		case g.Hardware == "":
			bad("plan.gpus[%d].hardware: name a GPU (a catalogue name or a hardware spec file)", i)
		case seen[g.Hardware]:
			bad("%s: listed twice", at)
		}
		seen[g.Hardware] = true
		if g.Count <= 0 {
			bad("%s: count is %d: give the number of GPUs on offer (> 0)", at, g.Count)
		}
		if !(g.PricePerHour > 0) {
			bad("%s: price_per_hour is %g: give a price per GPU-hour > 0", at, g.PricePerHour)
		}
	}
	if p.TargetRPS < 0 {
		bad("plan.target_rps is %g: give a rate >= 0 (0: none)", p.TargetRPS)
	}
	if p.RateSteps < 0 || p.RateSteps > 20 {
		bad("plan.rate_steps is %d: give 1 to 20 bisection steps (0: 6)", p.RateSteps)
	}
	if err := p.Space.check(); err != nil {
		errs = append(errs, err)
	}
	switch k := pd.Workload.Kind; k {
	case "trace", "poisson", "constant", "gamma":
	default:
		bad("workload.kind is %s: a plan bisects the offered rate of an open loop (trace, poisson, constant, gamma)", k)
	}
	return errors.Join(errs...)
}

func (s Space) check() error {
	var errs []error
	positive := func(key string, xs []int) {
		for _, x := range xs {
			if x <= 0 {
				errs = append(errs, fmt.Errorf("plan.space.%s has %d: every value is > 0", key, x))
			}
		}
	}
	positive("tensor_parallel", s.TensorParallel)
	positive("expert_parallel", s.ExpertParallel)
	positive("replicas", s.Replicas)
	positive("max_num_seqs", s.MaxNumSeqs)
	positive("max_num_batched_tokens", s.MaxNumBatchedTokens)
	for _, l := range s.Layouts {
		if _, _, err := parseLayout(l); err != nil {
			errs = append(errs, fmt.Errorf("plan.space.layouts: %w", err))
		}
	}
	return errors.Join(errs...)
}

// parseLayout reads agg (0, 0) or xPyD (x prefill, y decode).
func parseLayout(s string) (x, y int, err error) {
	if s == "agg" {
		return 0, 0, nil
	}
	ps, ds, ok := strings.Cut(strings.ToLower(s), "p")
	d, okd := strings.CutSuffix(ds, "d")
	x, errx := strconv.Atoi(ps)
	y, erry := strconv.Atoi(d)
	if !ok || !okd || errx != nil || erry != nil || x <= 0 || y <= 0 {
		return 0, 0, fmt.Errorf("layout %q: agg, or xPyD with x prefill and y decode engines (1p2d)", s)
	}
	return x, y, nil
}

// offer is the offer of a hardware name (checked present at compile).
func (p Spec) offer(hw string) (Offer, bool) {
	for _, g := range p.GPUs {
		if g.Hardware == hw {
			return g, true
		}
	}
	return Offer{}, false
}

// Axis is one searched key and its values, as a sweep varies it.
type Axis struct {
	Key    string
	Values []string
}

// Axes are the sweep keys of the space, slowest first: the GPU, the
// parallelism and dtypes, the pools (layout × replicas × expert
// parallelism) and the engine limits. The GPU is always one.
func (p Spec) Axes() []Axis {
	var out []Axis
	add := func(key string, vals []string) {
		if len(vals) > 0 {
			out = append(out, Axis{Key: key, Values: vals})
		}
	}
	var hw []string
	for _, g := range p.GPUs {
		hw = append(hw, g.Hardware)
	}
	add("hardware", hw)
	add("tensor_parallel", itoa(p.Space.TensorParallel))
	add("weight_dtype", p.Space.WeightDType)
	add("kv_cache_dtype", p.Space.KVCacheDType)
	add("cluster.pools", p.Space.pools())
	add("engine.max_num_seqs", itoa(p.Space.MaxNumSeqs))
	add("engine.max_num_batched_tokens", itoa(p.Space.MaxNumBatchedTokens))
	return out
}

// pools are the cluster.pools values of the space: each layout at each
// replica count (copies of the agg engine or of the xPyD unit), at each
// expert-parallel size (engines per instance).
func (s Space) pools() []string {
	if len(s.Layouts) == 0 && len(s.Replicas) == 0 && len(s.ExpertParallel) == 0 {
		return nil
	}
	layouts, reps, eps := or(s.Layouts, "agg"), orInt(s.Replicas, 1), orInt(s.ExpertParallel, 1)
	pool := func(role string, n, ep int) string {
		v := fmt.Sprintf("role: %s, replicas: %d", role, n*ep)
		if ep > 1 {
			v += fmt.Sprintf(", expert_parallel: %d", ep)
		}
		return "{" + v + "}"
	}
	var out []string
	for _, l := range layouts {
		x, y, _ := parseLayout(l)
		for _, ep := range eps {
			for _, r := range reps {
				if x == 0 {
					out = append(out, "{agg: "+pool(cluster.RoleBoth, r, ep)+"}")
				} else {
					out = append(out, "{prefill: "+pool(cluster.RolePrefill, x*r, ep)+", decode: "+pool(cluster.RoleDecode, y*r, ep)+"}")
				}
			}
		}
	}
	return out
}

func itoa(xs []int) []string {
	var out []string
	for _, x := range xs {
		out = append(out, strconv.Itoa(x))
	}
	return out
}

func or(xs []string, d string) []string {
	if len(xs) == 0 {
		return []string{d}
	}
	return xs
}

func orInt(xs []int, d int) []int {
	if len(xs) == 0 {
		return []int{d}
	}
	return xs
}
