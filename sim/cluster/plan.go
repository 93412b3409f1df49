package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/catalog/manifest"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/pricing"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/workload"
)

// Plan is a validated placement, ready to run: every pool's priced engine,
// the router, the links and the expert-parallel instances.
type Plan struct {
	Scenario Scenario
	Pools    []*PoolPlan
	// Router is the router spec with its name resolved.
	Router RouterSpec
	// KVLink carries prompt KV from prefill to decode engines
	// (disaggregated clusters).
	KVLink Link
	// KVBytesPerToken is the KV one GPU stores per prompt token: what a
	// transfer moves per token.
	KVBytesPerToken int64
	// Shape is the whole model, its routed experts in Shape.MoE; the
	// engines of an expert-parallel pool price its DenseShape.
	Shape catalog.Shape
	// Scales are the calibrated multipliers of the expert-parallel parts.
	Scales Scales
}

// PoolPlan is one pool, planned.
type PoolPlan struct {
	Name, Role     string
	Replicas       int
	ExpertParallel int
	// Engine is each engine's plan: the whole model, or in an
	// expert-parallel pool the DenseShape (the experts are the instance's).
	Engine *sim.Plan
	// ExpertLink joins the ranks of an expert-parallel instance.
	ExpertLink Link
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

// single reports a cluster that is one plain engine: it runs, records and
// describes itself exactly as simulate's engine.
func (p *Plan) single() bool {
	return len(p.Pools) == 1 && p.Pools[0].Replicas == 1 && !p.ExpertParallel() && !p.Elastic()
}

func (p *Plan) routerName() string { return p.Router.Name }

// Of is the cluster of the one engine p plans (simulate's).
func Of(p *sim.Plan) *Plan {
	return &Plan{Scenario: Scenario{Scenario: p.Scenario}, Router: RouterSpec{Name: RouterRoundRobin}, Shape: p.Shape,
		KVBytesPerToken: p.Shape.KVBytesPerToken(),
		Pools:           []*PoolPlan{{Name: DefaultPool, Role: RoleBoth, Replicas: 1, Engine: p}}}
}

// Plan checks the scenario and its placement and plans every pool,
// refusing what could not run with a message that names the field.
func (sc Scenario) Plan() (*Plan, error) { return sc.plan(true) }

// EnginePlan is Plan without the workload, for callers that bring their
// own arrivals (request replay, what-if stages).
func (sc Scenario) EnginePlan() (*Plan, error) { return sc.plan(false) }

func (sc Scenario) plan(withWorkload bool) (*Plan, error) {
	spec := sc.Cluster
	if err := spec.check(); err != nil {
		return nil, err
	}
	if err := sc.checkSLO(); err != nil {
		return nil, err
	}
	hw, shape, err := sc.Lookup()
	if err != nil {
		return nil, err
	}
	pools := spec.pools()
	if err := checkExperts(pools, shape); err != nil {
		return nil, err
	}
	p := &Plan{Scenario: sc, Router: spec.Router, Shape: shape, KVBytesPerToken: shape.KVBytesPerToken()}
	if p.Router.Name == "" {
		p.Router.Name = RouterRoundRobin
	}
	var errs []error
	for _, ps := range pools {
		pp, err := sc.planPool(ps, hw, shape, withWorkload)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p.Pools = append(p.Pools, pp)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := p.finish(spec.Links); err != nil {
		return nil, err
	}
	return p, nil
}

// finish checks what spans pools, reads the artifact's expert-parallel
// scales and resolves the links and the experts' pricing.
func (p *Plan) finish(links Links) error {
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
		l, err := DefaultLink(links.Expert, pp.Engine.HW, "cluster.links.expert")
		if err != nil {
			return err
		}
		pp.ExpertLink = l
		pp.moe = newMoEPricer(p.Shape, pp.Engine.HW, pp.ExpertParallel*max(1, p.Shape.TP), l, p.Scales)
		if n := pp.expertPricingNote(); n != "" {
			pp.Engine.Notes = append(slices.Clip(pp.Engine.Notes), n)
		}
	}
	return nil
}

// expertPricingNote says, for a pool whose FPM is an ops prior, that its
// routed experts are priced by the roofline of moePricer: the databases'
// MoE tables are not read.
func (pp *PoolPlan) expertPricingNote() string {
	if pp.moe == nil || !pricing.IsOps(pp.Engine.FPMName) {
		return ""
	}
	return fmt.Sprintf("pool %s: %s prices attention and the dense layers; the routed experts and the all-to-all are priced by the roofline (an ops database's MoE tables are not read)",
		pp.Name, pp.Engine.FPMName)
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

// check refuses a placement that cannot run whatever the model, naming
// the field (checkExperts checks what depends on the model).
func (s Spec) check() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if err := s.Router.check(); err != nil {
		errs = append(errs, err)
	}
	roles := map[string]int{}
	for _, ps := range s.pools() {
		at := "cluster.pools." + ps.Name
		switch ps.Role {
		case "", RoleBoth, RolePrefill, RoleDecode:
			roles[roleOf(ps)]++
		default:
			add("%s.role %q: use both, prefill or decode", at, ps.Role)
		}
		if ps.Replicas < 1 && !(ps.Replicas == 0 && ps.Autoscale != nil) {
			add("%s.replicas is %d: a pool needs at least one engine (one or more GPUs each)", at, ps.Replicas)
		}
		if err := ps.Autoscale.check(ps, s.Router.Name); err != nil {
			errs = append(errs, err)
		}
		switch {
		case ps.ExpertParallel < 0:
			add("%s.expert_parallel is %d: use 0 (none) or the engines per expert-parallel instance", at, ps.ExpertParallel)
		case ps.ExpertParallel > 1 && ps.Replicas >= 1 && ps.Replicas%ps.ExpertParallel != 0:
			add("%s.expert_parallel %d does not divide replicas %d: an instance has expert_parallel engines", at, ps.ExpertParallel, ps.Replicas)
		}
	}
	if len(errs) == 0 {
		switch {
		case roles[RoleBoth] == 1 && roles[RolePrefill]+roles[RoleDecode] == 0:
		case roles[RoleBoth] == 0 && roles[RolePrefill] == 1 && roles[RoleDecode] == 1:
		default:
			add("cluster.pools: use one pool of role both (aggregated), or one prefill and one decode pool (disaggregated); found %d both, %d prefill, %d decode",
				roles[RoleBoth], roles[RolePrefill], roles[RoleDecode])
		}
	}
	return errors.Join(errs...)
}

// checkExperts refuses expert parallelism the model cannot have: a model
// without routed experts, or more ranks than experts.
func checkExperts(pools []PoolSpec, s catalog.Shape) error {
	var errs []error
	for _, ps := range pools {
		at := "cluster.pools." + ps.Name
		switch {
		case ps.ExpertParallel <= 1:
		case s.MoE.Experts == 0:
			errs = append(errs, fmt.Errorf("%s.expert_parallel is %d but model %s has no routed experts: expert parallelism needs a mixture of experts (a catalogue MoE model or its config.json)",
				at, ps.ExpertParallel, s.Name))
		case ps.ExpertParallel > s.MoE.Experts:
			errs = append(errs, fmt.Errorf("%s.expert_parallel is %d, more ranks than the model's %d experts: use at most %d",
				at, ps.ExpertParallel, s.MoE.Experts, s.MoE.Experts))
		}
	}
	return errors.Join(errs...)
}

func roleOf(ps PoolSpec) string {
	if ps.Role == "" {
		return RoleBoth
	}
	return ps.Role
}

// pools is the spec's pools, or the one default engine; prefill first.
func (s Spec) pools() []PoolSpec {
	if len(s.Pools) == 0 {
		return []PoolSpec{{Name: DefaultPool, Role: RoleBoth, Replicas: 1}}
	}
	out := make([]PoolSpec, 0, len(s.Pools))
	for _, ps := range s.Pools {
		if roleOf(ps) != RoleDecode {
			out = append(out, ps)
		}
	}
	for _, ps := range s.Pools {
		if roleOf(ps) == RoleDecode {
			out = append(out, ps)
		}
	}
	return out
}

// planPool plans one pool's engine on hw (the scenario's GPU, unless the
// pool names its own) and the model s: the whole model, or in an
// expert-parallel pool its DenseShape with the KV capacity left beside the
// GPU's share of the experts.
func (sc Scenario) planPool(ps PoolSpec, hw catalog.Hardware, s catalog.Shape, withWorkload bool) (*PoolPlan, error) {
	at := "cluster.pools." + ps.Name
	psc := sc.Scenario
	if err := sc.Cluster.Engine.Over(&psc.Engine); err != nil {
		return nil, fmt.Errorf("cluster.engine: %v", err)
	}
	if err := ps.Engine.Over(&psc.Engine); err != nil {
		return nil, fmt.Errorf("%s.engine: %v", at, err)
	}
	if ps.Hardware != "" {
		h, err := catalog.LookupHardware(ps.Hardware)
		if err != nil {
			return nil, catalog.AtKey(at+".hardware", err)
		}
		hw, psc.Hardware = h, ps.Hardware
	}
	if ps.ExpertParallel > 1 {
		if psc.Engine.NumGPUBlocks == 0 {
			n, err := catalog.KVBlocks(hw, s, psc.Engine.BlockSize, psc.Engine.GPUMemoryUtilization, ps.ExpertParallel)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", at, err)
			}
			psc.Engine.NumGPUBlocks = n
		}
		s = catalog.DenseShape(s)
	}
	var sp *sim.Plan
	var err error
	if withWorkload {
		sp, err = psc.PlanOn(hw, s)
	} else {
		sp, err = psc.EnginePlanOn(hw, s)
	}
	if err != nil {
		return nil, prefix(at, sc.Cluster.Pools != nil, err)
	}
	scaling, n := scalingOf(ps, sc.SLO)
	return &PoolPlan{Name: ps.Name, Role: roleOf(ps), Replicas: n, ExpertParallel: ps.ExpertParallel, Engine: sp, Scaling: scaling}, nil
}

func prefix(at string, named bool, err error) error {
	if !named {
		return err
	}
	return fmt.Errorf("%s: %w", at, err)
}

// Source builds the workload of the plan's scenario (the first pool's
// engine maps the trace's prefix hashes to the block size all pools
// share).
func (p *Plan) Source() (src workload.Peeker, inputSHA string, cleanup func(), err error) {
	return p.Pools[0].Engine.Source()
}

// Manifest is the provenance of the plan's dataset: simulate's for one
// engine; beyond, the whole model (experts and all) and the placement
// (pools, router, links).
func (p *Plan) Manifest(command []string, inputSHA string) datasets.Manifest {
	m := p.Pools[0].Engine.Manifest(command, inputSHA)
	if p.single() {
		return m
	}
	m.Model = manifest.ModelSection(p.Shape)
	c := &datasets.Cluster{Router: p.Router.Name, Sequential: p.SequentialReason()}
	if p.Disaggregated() {
		c.KVTransfer = linkOf(p.KVLink)
	}
	for _, pp := range p.Pools {
		cp := datasets.ClusterPool{Name: pp.Name, Role: pp.Role, Replicas: pp.Replicas, ExpertParallel: pp.ExpertParallel,
			Engine: pp.Engine.Manifest(nil, "").Engine}
		if hw := pp.Engine.HW; hw.Name != m.Hardware.GPUName {
			cp.Hardware = hw.Name
			if !strings.HasPrefix(hw.File, "builtin:") && hw.File != "" {
				cp.Hardware = hw.File // a spec file: found again by its path
			}
		}
		if pp.ExpertParallel > 1 {
			cp.ExpertLink = linkOf(pp.ExpertLink)
		}
		for i := 0; i < pp.Replicas; i++ {
			cp.Workers = append(cp.Workers, fmt.Sprintf("%s-%d", pp.Name, i))
		}
		c.Pools = append(c.Pools, cp)
	}
	m.Cluster = c
	m.Hardware.GPUCount = p.GPUs()
	m.Engine.WorkerCount = p.Engines()
	return m
}

func linkOf(l Link) *datasets.Link {
	return &datasets.Link{BandwidthGBs: l.BytesPerSec / 1e9, LatencyUs: l.LatencyNs / 1e3}
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
