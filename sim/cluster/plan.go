package cluster

import (
	"encoding/json"
	"fmt"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/sim"
)

// Plan is a validated placement, ready to run: every pool's priced engine,
// the router, the links and the expert-parallel instances. It is plain
// data, as a raft.Config is: package scenario builds it from a scenario or
// a manifest and Resolve completes it; one engine is a cluster of one.
type Plan struct {
	Pools []*PoolPlan
	// Router is the router spec with its name resolved.
	Router RouterSpec
	// KVLink carries prompt KV from prefill to decode engines
	// (disaggregated clusters).
	KVLink Link
	// KVBytesPerToken is the KV one GPU stores per prompt token: what a
	// transfer moves per token.
	KVBytesPerToken int64
	// Shape is the whole model, its routed experts in Shape.MoE; the
	// engines of an expert-parallel pool price its catalog.DenseShape.
	Shape catalog.Shape
	// Scales are the calibrated multipliers of the expert-parallel parts.
	Scales Scales
	// Seed roots the routers' random streams (New).
	Seed uint64
	// SLO, when set, is the objective a run reports its attainment of.
	SLO SLOSpec
	// ClosedLoop is a workload whose users wait on their last request's
	// finish: its arrivals are not known in advance.
	ClosedLoop bool
	// MaxSteps, when positive, bounds the steps the engines run together:
	// the next one fails the run with a StepLimitError (a distributed
	// sweep's per-task limit).
	MaxSteps int64
}

// PoolPlan is one pool, planned.
type PoolPlan struct {
	Name, Role     string
	Replicas       int
	ExpertParallel int
	// Engine is each engine's plan: the whole model, or in an
	// expert-parallel pool catalog.DenseShape (the experts are the
	// instance's).
	Engine *sim.Plan
	// ExpertLink joins the ranks of an expert-parallel instance (within a
	// node, where ExpertLayout spans nodes).
	ExpertLink Link
	// ExpertLayout is where an instance's GPUs sit when it spans nodes
	// over the hardware's links (ExpertLinks): its all-to-all crosses the
	// network. Zero on one node or over a stated link.
	ExpertLayout catalog.Layout
	// Scaling is an autoscaled pool's policy, defaults resolved (nil: the
	// pool keeps Replicas engines).
	Scaling *datasets.PoolScaling
	moe     *moePricer
}

// GPUs is the pool's GPU count: engines × tensor parallelism.
func (p *PoolPlan) GPUs() int { return p.Replicas * max(1, p.Engine.Shape.TP) }

// GPUs is the cluster's GPU count.
func (p *Plan) GPUs() int {
	n := 0
	for _, pp := range p.Pools {
		n += pp.GPUs()
	}
	return n
}

// Engines is the cluster's engine count.
func (p *Plan) Engines() int {
	n := 0
	for _, pp := range p.Pools {
		n += pp.Replicas
	}
	return n
}

// Disaggregated reports whether prefill and decode run on separate pools.
func (p *Plan) Disaggregated() bool { return len(p.Pools) == 2 }

// ExpertParallel reports whether a pool runs expert-parallel instances
// (whose parts calibrate scales: moe.expert_compute, moe.expert_stream,
// moe.a2a).
func (p *Plan) ExpertParallel() bool {
	for _, pp := range p.Pools {
		if pp.moe != nil {
			return true
		}
	}
	return false
}

// Single reports a cluster that is one plain engine: it runs, records and
// describes itself exactly as one sim.Engine.
func (p *Plan) Single() bool {
	return len(p.Pools) == 1 && p.Pools[0].Replicas == 1 && !p.ExpertParallel() && !p.Elastic()
}

func (p *Plan) routerName() string { return p.Router.Name }

// Resolve completes a plan whose pools are planned: it checks what spans
// pools, reads the artifact's expert-parallel scales and resolves the
// links (each left out: the GPU's interconnect) and the experts' pricing.
func (p *Plan) Resolve(links Links) error {
	bs := p.Pools[0].Engine.Sched.BlockSize
	for _, pp := range p.Pools[1:] {
		if b := pp.Engine.Sched.BlockSize; b != bs {
			return fmt.Errorf("cluster.pools.%s: block_size %d differs from pool %s's %d: the pools share one prefix-hash mapping; use one block size",
				pp.Name, b, p.Pools[0].Name, bs)
		}
	}
	s, ok, err := ScalesOf(p.Pools[0].Engine.Artifact)
	if err != nil {
		return fmt.Errorf("fpm: %w", err)
	}
	if ok {
		p.Scales = s
	}
	if p.Disaggregated() {
		l, err := DefaultLink(links.KVTransfer, p.Pools[0].Engine.HW, "cluster.links.kv_transfer")
		if err != nil {
			return err
		}
		p.KVLink = l
	}
	for _, pp := range p.Pools {
		if pp.ExpertParallel <= 1 {
			continue
		}
		gpus := pp.ExpertParallel * max(1, p.Shape.TP)
		l, layout, err := ExpertLinks(links.Expert, pp.Engine.HW, gpus, "cluster.links.expert")
		if err != nil {
			return fmt.Errorf("cluster.pools.%s: %w", pp.Name, err)
		}
		pp.ExpertLink, pp.ExpertLayout = l, layout
		pp.moe = newMoEPricer(p.Shape, pp.Engine.HW, gpus, l, p.Scales)
		if layout.MultiNode() {
			pp.moe.acrossNodes(layout)
		}
	}
	return nil
}

// WithScales is the plan with the expert-parallel parts scaled (calibrate).
func (p *Plan) WithScales(s Scales) *Plan {
	q := p.clone()
	q.Scales = s
	for _, pp := range q.Pools {
		if pp.moe != nil {
			m := *pp.moe
			m.scales = s.or1()
			pp.moe = &m
		}
	}
	return q
}

// WithModels is the plan with every pool's forward-pass and host models
// replaced (calibrate, replay with another model).
func (p *Plan) WithModels(fpModel fpm.FPM, host fpm.HostModel) *Plan {
	q := p.clone()
	for _, pp := range q.Pools {
		e := *pp.Engine
		e.FPM, e.Host = fpModel, host
		pp.Engine = &e
	}
	return q
}

// IntervalLevel is the coverage of the step-time intervals a caller asked
// the plan's FPM for (fpm.IntervalLevel: 0 for the FPM's own, negative
// for none); 0 when the FPM has none.
func (p *Plan) IntervalLevel(requested float64) float64 {
	return fpm.IntervalLevel(p.Pools[0].Engine.FPM, requested)
}

// Bound is the plan with every pool's FPM at the lower edge of its
// prediction interval at level, or the upper one (fpm.Bound); the
// experts of an expert-parallel pool keep their point price. A pool whose
// FPM has no intervals is refused, naming it.
func (p *Plan) Bound(level float64, upper bool) (*Plan, error) {
	q := p.clone()
	for _, pp := range q.Pools {
		im, ok := pp.Engine.FPM.(fpm.IntervalFPM)
		if !ok || fpm.NoUncertainty(im, pp.Engine.FPMName) != "" {
			return nil, fmt.Errorf("pool %s: fpm %s has no prediction intervals: use a recipe, linear or grid artifact", pp.Name, pp.Engine.FPMName)
		}
		e := *pp.Engine
		e.FPM = fpm.Bound{M: im, Level: level, Upper: upper}
		pp.Engine = &e
	}
	return q, nil
}

// clone copies the plan and its pools (not their engines' plans).
func (p *Plan) clone() *Plan {
	q := *p
	q.Pools = make([]*PoolPlan, len(p.Pools))
	for i, pp := range p.Pools {
		c := *pp
		q.Pools[i] = &c
	}
	return &q
}

// moeParams is where calibrate stores the expert-parallel scales in an
// artifact's params (beside sim's params.host).
const moeParamsKey = "moe"

// ScalesOf reads an artifact's params.moe (false when it has none).
func ScalesOf(a *fpm.Artifact) (Scales, bool, error) {
	if a == nil || len(a.Params) == 0 {
		return Scales{}, false, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(a.Params, &m); err != nil {
		return Scales{}, false, nil
	}
	raw, ok := m[moeParamsKey]
	if !ok {
		return Scales{}, false, nil
	}
	var s Scales
	if err := json.Unmarshal(raw, &s); err != nil || s.ExpertCompute < 0 || s.ExpertStream < 0 || s.A2A < 0 {
		return Scales{}, false, fmt.Errorf("params.%s: want {\"expert_compute\", \"expert_stream\", \"a2a\"}: multipliers >= 0", moeParamsKey)
	}
	return s, true, nil
}

// WithScalesParam stores s in an artifact's params.moe, keeping its other
// params (pricing.WithHost's host).
func WithScalesParam(a *fpm.Artifact, s Scales) error { return a.SetParam(moeParamsKey, s) }
