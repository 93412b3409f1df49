package scenario

import (
	"errors"
	"fmt"
	"math"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/sim/cluster"
)

// The planner's times stay within what nanoseconds of simulated time
// hold, and decisions at least a millisecond apart.
const (
	maxScaleS    = 1e7
	minIntervalS = 1e-3
)

// AutoscaleSpec is a planner that changes a pool's engines during a run,
// deciding every interval from what the interval measured (Dynamo's
// planner reads request load, KV use, TTFT and ITL per adjustment
// interval). A new engine holds its GPUs from scale_up_delay_s after the
// decision and becomes routable load_time_s later; an engine scaled down
// takes no new requests and is removed once its own have finished.
type AutoscaleSpec struct {
	Policy      string  `yaml:"policy"`     // load (default) | slo
	IntervalS   float64 `yaml:"interval_s"` // between decisions; default 60
	MinReplicas int     `yaml:"min_replicas"`
	MaxReplicas int     `yaml:"max_replicas"`
	// TargetLoad is the load per routable engine the pool is sized for,
	// in (0, 1]; default 0.25 (max_num_seqs 256: 64 requests in flight).
	TargetLoad float64 `yaml:"target_load"`
	// Headroom (slo) is the share of the SLO kept free, in [0, 1); default
	// 0.2: scale up once the p90 exceeds 80% of it.
	Headroom *float64 `yaml:"headroom"`
	// ScaleUpDelayS is from a decision to the new engine's start (a node
	// provisioned); LoadTimeS from its start to routable (weights loaded,
	// graphs captured); CooldownS the time after any change before the
	// pool may shrink.
	ScaleUpDelayS float64  `yaml:"scale_up_delay_s"`
	LoadTimeS     float64  `yaml:"load_time_s"`
	CooldownS     *float64 `yaml:"cooldown_s"`
}

// check refuses a policy that could not run on pool ps, naming the key and
// a value that works; a nil spec is a fixed pool.
func (a *AutoscaleSpec) check(ps PoolSpec, router string) error {
	if a == nil {
		return nil
	}
	at := "cluster.pools." + ps.Name + ".autoscale"
	var errs []error
	add := func(format string, v ...any) { errs = append(errs, fmt.Errorf(format, v...)) }
	switch a.Policy {
	case "", cluster.PolicyLoad, cluster.PolicySLO:
	default:
		add("%s.policy %q: use %s or %s", at, a.Policy, cluster.PolicyLoad, cluster.PolicySLO)
	}
	if ps.ExpertParallel > 1 {
		add("%s: pool %s runs expert-parallel instances, whose ranks step together and cannot be added one by one: remove expert_parallel or autoscale", at, ps.Name)
	}
	if router == cluster.RouterSession {
		add("%s: router session keeps each session on its engine, which a scale-down removes: use least_requests, kv or another router", at)
	}
	lo := a.MinReplicas
	if lo == 0 {
		lo = 1
	}
	switch {
	case a.MinReplicas < 0:
		add("%s.min_replicas is %d: use 1 or more (a pool keeps one engine to route to)", at, a.MinReplicas)
	case a.MaxReplicas < 1:
		add("%s.max_replicas is %d: set the most engines the pool may grow to, e.g. %d", at, a.MaxReplicas, max(2, 4*ps.Replicas))
	case a.MaxReplicas < lo:
		add("%s.max_replicas %d is below min_replicas %d: use max_replicas >= %d", at, a.MaxReplicas, lo, lo)
	case ps.Replicas != 0 && (ps.Replicas < lo || ps.Replicas > a.MaxReplicas):
		add("cluster.pools.%s.replicas %d is outside the autoscale range [%d, %d]: start within it, e.g. replicas: %d", ps.Name, ps.Replicas, lo, a.MaxReplicas, lo)
	}
	for _, d := range []struct {
		key string
		v   float64
	}{{"interval_s", a.IntervalS}, {"scale_up_delay_s", a.ScaleUpDelayS}, {"load_time_s", a.LoadTimeS}, {"cooldown_s", deref(a.CooldownS, 0)}} {
		if !(d.v >= 0 && d.v <= maxScaleS) {
			add("%s.%s is %g: use a time in seconds from 0 to %g", at, d.key, d.v, maxScaleS)
		}
	}
	if a.IntervalS > 0 && a.IntervalS < minIntervalS {
		add("%s.interval_s is %g: use at least %g s between decisions, or 0 for %g", at, a.IntervalS, minIntervalS, cluster.DefaultScaleIntervalS)
	}
	if t := a.TargetLoad; t != 0 && !(t > 0 && t <= 1) {
		add("%s.target_load is %g: use a load per engine in (0, 1], e.g. %g", at, t, cluster.DefaultTargetLoad)
	}
	if h := deref(a.Headroom, 0); !(h >= 0 && h < 1) {
		add("%s.headroom is %g: use a share of the SLO in [0, 1), e.g. %g", at, h, cluster.DefaultHeadroom)
	}
	return errors.Join(errs...)
}

// checkSLO refuses an objective that is negative or not a number, and a
// policy slo without one.
func (sc Scenario) checkSLO() error {
	o := sc.SLO
	for _, v := range []struct {
		key string
		v   float64
	}{{"slo.ttft_ms", o.TTFTMs}, {"slo.itl_ms", o.ITLMs}} {
		if !(v.v >= 0) || math.IsInf(v.v, 0) {
			return fmt.Errorf("%s is %g: use a latency in ms > 0, or 0 for none on it", v.key, v.v)
		}
	}
	for _, ps := range sc.Cluster.Pools {
		if a := ps.Autoscale; a != nil && a.Policy == cluster.PolicySLO && o.TTFTMs == 0 && o.ITLMs == 0 {
			return fmt.Errorf("cluster.pools.%s.autoscale.policy slo keeps headroom to the scenario's slo, which sets none: add slo: {ttft_ms: 500, itl_ms: 50}, or use policy load", ps.Name)
		}
	}
	return nil
}

func deref(p *float64, def float64) float64 {
	if p == nil {
		return def
	}
	return *p
}

// scalingOf is pool ps's policy with its defaults, as the manifest records
// it (nil: a fixed pool), and the engines it starts with.
func scalingOf(ps PoolSpec, slo cluster.SLOSpec) (*datasets.PoolScaling, int) {
	if ps.Autoscale == nil {
		return nil, ps.Replicas
	}
	r := ps.Autoscale.resolved(ps.Name)
	if r.Policy == cluster.PolicySLO {
		r.SLOTTFTMs, r.SLOITLMs = slo.TTFTMs, slo.ITLMs
	}
	if ps.Replicas == 0 {
		return &r, r.MinReplicas
	}
	return &r, ps.Replicas
}

// specOf is the spec of a recorded policy (the inverse of resolved).
func specOf(r *datasets.PoolScaling) *AutoscaleSpec {
	h, cool := r.Headroom, r.CooldownS
	return &AutoscaleSpec{Policy: r.Policy, IntervalS: r.IntervalS, MinReplicas: r.MinReplicas, MaxReplicas: r.MaxReplicas,
		TargetLoad: r.TargetLoad, Headroom: &h, ScaleUpDelayS: r.ScaleUpDelayS, LoadTimeS: r.LoadTimeS, CooldownS: &cool}
}

// resolved is the spec with its defaults.
func (a *AutoscaleSpec) resolved(pool string) datasets.PoolScaling {
	r := datasets.PoolScaling{Pool: pool, Policy: a.Policy, IntervalS: a.IntervalS, MinReplicas: max(1, a.MinReplicas),
		MaxReplicas: a.MaxReplicas, TargetLoad: a.TargetLoad, ScaleUpDelayS: a.ScaleUpDelayS, LoadTimeS: a.LoadTimeS,
		CooldownS: deref(a.CooldownS, cluster.DefaultCooldownS)}
	if r.Policy == "" {
		r.Policy = cluster.PolicyLoad
	}
	if r.IntervalS == 0 {
		r.IntervalS = cluster.DefaultScaleIntervalS
	}
	if r.TargetLoad == 0 {
		r.TargetLoad = cluster.DefaultTargetLoad
	}
	if r.Policy == cluster.PolicySLO {
		r.Headroom = deref(a.Headroom, cluster.DefaultHeadroom)
	}
	return r
}
