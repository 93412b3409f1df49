package scenario

import (
	"errors"
	"fmt"
	"slices"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/catalog/manifest"
	"github.com/steplab/steplab/pricing"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/cluster"
	"github.com/steplab/steplab/sim/sched"
)

// Plan is a validated scenario, ready to run: the cluster its engines
// form (one engine is a cluster of one), the scenario it came from and
// each pool's engine block as planned.
type Plan struct {
	*cluster.Plan
	// Scenario is what the plan was made from: a scenario document, or
	// the engine and workload a manifest records.
	Scenario Scenario
	// EngineBlocks are the pools' engine blocks, in the order of Pools:
	// the scenario's with the cluster's and the pool's engine keys over
	// it (what each pool's manifest section records).
	EngineBlocks []EngineSpec
}

// Engine is the first pool's engine plan: the one engine of a scenario
// without a cluster block.
func (p *Plan) Engine() *sim.Plan { return p.Pools[0].Engine }

// Plan checks the scenario and its placement and plans every pool,
// refusing what could not run with a message that names the field (and
// says what to change).
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
	hw, shape, err := sc.lookup()
	if err != nil {
		return nil, err
	}
	pools := spec.pools()
	if err := checkExperts(pools, shape); err != nil {
		return nil, err
	}
	p := &Plan{Scenario: sc, Plan: sc.clusterOf(spec.Router, shape)}
	if p.Router.Name == "" {
		p.Router.Name = cluster.RouterRoundRobin
	}
	var errs []error
	for _, ps := range pools {
		pp, e, err := sc.planPool(ps, hw, shape, withWorkload)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p.Pools = append(p.Pools, pp)
		p.EngineBlocks = append(p.EngineBlocks, e)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := resolve(p.Plan, spec.Links); err != nil {
		return nil, err
	}
	return p, nil
}

// clusterOf is the cluster plan of the scenario's engines before its pools
// are planned: the router, the whole model and what the run takes from
// the scenario (its seed, objective and whether users wait on finishes).
func (sc Scenario) clusterOf(r cluster.RouterSpec, shape catalog.Shape) *cluster.Plan {
	return &cluster.Plan{Router: r, Shape: shape, KVBytesPerToken: shape.KVBytesPerToken(), Seed: sc.Seed, SLO: sc.SLO,
		ClosedLoop: sc.Workload.Kind == "closed"}
}

// resolve completes a planned cluster (cluster.Plan.Resolve) and notes,
// in each expert-parallel pool's engine, how its experts are priced.
func resolve(p *cluster.Plan, links cluster.Links) error {
	if err := p.Resolve(links); err != nil {
		return err
	}
	for _, pp := range p.Pools {
		if n := expertPricingNote(pp); n != "" {
			pp.Engine.Notes = append(slices.Clip(pp.Engine.Notes), n)
		}
	}
	return nil
}

// expertPricingNote says, for a pool whose FPM is an ops prior, that its
// routed experts are priced by the roofline of package sim/cluster: the databases'
// MoE tables are not read.
func expertPricingNote(pp *cluster.PoolPlan) string {
	if pp.ExpertParallel <= 1 || !pricing.IsOps(pp.Engine.FPMName) {
		return ""
	}
	return fmt.Sprintf("pool %s: %s prices attention and the dense layers; the routed experts and the all-to-all are priced by the roofline (an ops database's MoE tables are not read)",
		pp.Name, pp.Engine.FPMName)
}

// check refuses a placement that cannot run whatever the model, naming
// the field (checkExperts checks what depends on the model).
func (s Spec) check() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if err := s.Router.Check(); err != nil {
		errs = append(errs, err)
	}
	roles := map[string]int{}
	for _, ps := range s.pools() {
		at := "cluster.pools." + ps.Name
		switch ps.Role {
		case "", cluster.RoleBoth, cluster.RolePrefill, cluster.RoleDecode:
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
		case roles[cluster.RoleBoth] == 1 && roles[cluster.RolePrefill]+roles[cluster.RoleDecode] == 0:
		case roles[cluster.RoleBoth] == 0 && roles[cluster.RolePrefill] == 1 && roles[cluster.RoleDecode] == 1:
		default:
			add("cluster.pools: use one pool of role both (aggregated), or one prefill and one decode pool (disaggregated); found %d both, %d prefill, %d decode",
				roles[cluster.RoleBoth], roles[cluster.RolePrefill], roles[cluster.RoleDecode])
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
		return cluster.RoleBoth
	}
	return ps.Role
}

// pools is the spec's pools, or the one default engine; prefill first.
func (s Spec) pools() []PoolSpec {
	if len(s.Pools) == 0 {
		return []PoolSpec{{Name: cluster.DefaultPool, Role: cluster.RoleBoth, Replicas: 1}}
	}
	out := make([]PoolSpec, 0, len(s.Pools))
	for _, ps := range s.Pools {
		if roleOf(ps) != cluster.RoleDecode {
			out = append(out, ps)
		}
	}
	for _, ps := range s.Pools {
		if roleOf(ps) == cluster.RoleDecode {
			out = append(out, ps)
		}
	}
	return out
}

// planPool plans one pool's engine on hw (the scenario's GPU, unless the
// pool names its own) and the model s: the whole model, or in an
// expert-parallel pool its catalog.DenseShape with the KV capacity left
// beside the GPU's share of the experts. e is the pool's engine block.
func (sc Scenario) planPool(ps PoolSpec, hw catalog.Hardware, s catalog.Shape, withWorkload bool) (pp *cluster.PoolPlan, e EngineSpec, err error) {
	at := "cluster.pools." + ps.Name
	psc := sc
	if err := sc.Cluster.Engine.Over(&psc.Engine); err != nil {
		return nil, e, fmt.Errorf("cluster.engine: %v", err)
	}
	if err := ps.Engine.Over(&psc.Engine); err != nil {
		return nil, e, fmt.Errorf("%s.engine: %v", at, err)
	}
	if ps.Hardware != "" {
		h, err := catalog.LookupHardware(ps.Hardware)
		if err != nil {
			return nil, e, catalog.AtKey(at+".hardware", err)
		}
		hw, psc.Hardware = h, ps.Hardware
	}
	if ps.ExpertParallel > 1 {
		if psc.Engine.NumGPUBlocks == 0 {
			n, err := catalog.KVBlocks(hw, s, psc.Engine.BlockSize, psc.Engine.GPUMemoryUtilization, ps.ExpertParallel)
			if err != nil {
				return nil, e, fmt.Errorf("%s: %w", at, err)
			}
			psc.Engine.NumGPUBlocks = n
		}
		s = catalog.DenseShape(s)
	}
	sp, err := psc.planOn(hw, s, withWorkload)
	if err != nil {
		return nil, e, prefix(at, sc.Cluster.Pools != nil, err)
	}
	scaling, n := scalingOf(ps, sc.SLO)
	return &cluster.PoolPlan{Name: ps.Name, Role: roleOf(ps), Replicas: n, ExpertParallel: ps.ExpertParallel, Engine: sp, Scaling: scaling}, psc.Engine, nil
}

func prefix(at string, named bool, err error) error {
	if !named {
		return err
	}
	return fmt.Errorf("%s: %w", at, err)
}

// planOn plans the scenario's engine on the hardware and model shape
// given (a pool's GPU, the dense part of a mixture of experts), checking
// the workload against it when withWorkload.
func (sc Scenario) planOn(hw catalog.Hardware, shape catalog.Shape, withWorkload bool) (*sim.Plan, error) {
	p, err := sc.planEngine(manifest.Resolved{HW: hw, Shape: shape, HWKnown: true, ShapeKnown: true})
	if err != nil || !withWorkload {
		return p, err
	}
	if err := sc.Workload.check(p.Sched); err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	return p, nil
}

// lookup resolves the scenario's hardware and model in the catalogue (a
// name in any spelling, or a spec file or config.json path) and applies
// its tensor parallelism and dtypes: the one lookup of a scenario's GPU
// and model, which every pool prices.
func (sc Scenario) lookup() (catalog.Hardware, catalog.Shape, error) {
	var errs []error
	hw, err := catalog.LookupHardware(sc.Hardware)
	if err != nil {
		errs = append(errs, catalog.AtKey("hardware", err))
	}
	shape, err := sc.shape()
	var tpErr tpError
	switch {
	case errors.As(err, &tpErr) && len(errs) == 0:
		// A degree the heads refuse: name the ones this GPU takes too.
		if use := catalog.TPSuggestion(hw, tpErr.shape, sc.Engine.GPUMemoryUtilization); use != "" {
			err = fmt.Errorf("%w: %s", err, use)
		}
		errs = append(errs, err)
	case err != nil:
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		// The shape's notes (and so the manifest) say which GEMMs fall
		// back to weight-only on this GPU.
		shape.Notes = append(slices.Clip(shape.Notes), catalog.PrecisionNotes(hw, shape)...)
	}
	return hw, shape, errors.Join(errs...)
}

// shape looks the model up and applies the scenario's parallelism and
// dtypes.
func (sc Scenario) shape() (catalog.Shape, error) {
	s, err := catalog.LookupModel(sc.Model)
	if err != nil {
		return s, catalog.AtKey("model", err)
	}
	if sc.TensorParallel < 0 {
		return s, fmt.Errorf("tensor_parallel is %d: use 1 or more (0: the model's own)", sc.TensorParallel)
	}
	if s, err = s.WithDTypes(sc.WeightDType, sc.KVCacheDType); err != nil {
		return s, fmt.Errorf("weight_dtype/kv_cache_dtype: %w", err)
	}
	if sc.TensorParallel > 0 {
		s = s.WithTP(sc.TensorParallel)
	}
	if err := s.Validate(); err != nil {
		return s, tpError{fmt.Errorf("tensor_parallel: %w", err), s}
	}
	return s, nil
}

// tpError is a shape refused at its tensor-parallel degree.
type tpError struct {
	error
	shape catalog.Shape
}

func (e tpError) Unwrap() error { return e.error }

// planEngine is the one place an engine is planned, from a scenario or
// from a manifest (PlanFromManifest).
func (sc Scenario) planEngine(r manifest.Resolved) (*sim.Plan, error) {
	e := sc.Engine
	var errs []error
	if e.BlockSize <= 0 || e.BlockSize&(e.BlockSize-1) != 0 {
		errs = append(errs, fmt.Errorf("engine.block_size is %d: use a power of two such as 16", e.BlockSize))
	}
	if e.GPUMemoryUtilization <= 0 || e.GPUMemoryUtilization > 1 {
		errs = append(errs, fmt.Errorf("engine.gpu_memory_utilization is %g: use a fraction in (0, 1], e.g. 0.9", e.GPUMemoryUtilization))
	}
	for i, g := range e.CUDAGraphSizes {
		if g < 1 || (i > 0 && g <= e.CUDAGraphSizes[i-1]) {
			errs = append(errs, fmt.Errorf("engine.cuda_graph_sizes must be positive and increasing; entry %d is %d", i, g))
			break
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	needHW := e.NumGPUBlocks == 0 || pricing.IsPrior(sc.FPM)
	if needHW && !r.Known() {
		return nil, r.Err()
	}
	if r.Known() {
		// A TP group beyond one node fills whole nodes.
		if err := catalog.CheckTP(r.HW, r.Shape, e.GPUMemoryUtilization); err != nil {
			return nil, catalog.AtKey("tensor_parallel", err)
		}
	}
	blocks := e.NumGPUBlocks
	if blocks == 0 {
		var err error
		// The refusal names the model, the GPU and what to change.
		if blocks, err = catalog.KVBlocks(r.HW, r.Shape, e.BlockSize, e.GPUMemoryUtilization, 0); err != nil {
			return nil, err
		}
	}
	p := &sim.Plan{Async: e.AsyncScheduling, Graphs: e.CUDAGraphSizes, SerialWorker: e.SerialWorker}
	p.Sched = sched.Config{
		MaxNumSeqs: e.MaxNumSeqs, MaxNumBatchedTokens: e.MaxNumBatchedTokens, BlockSize: e.BlockSize,
		NumGPUBlocks: blocks, MaxModelLen: e.MaxModelLen, ChunkedPrefill: e.ChunkedPrefill,
		PrefixCaching: e.PrefixCaching, LongPrefillTokenThreshold: e.LongPrefillTokenThreshold,
	}
	if err := p.Sched.Validate(); err != nil {
		if e.NumGPUBlocks == 0 {
			// The capacity was sized from memory: say so, and that the
			// memory settings change it too.
			return nil, catalog.NoFit(fmt.Errorf("%w (engine.num_gpu_blocks=%d is what fits on %s at TP=%d and gpu_memory_utilization %.2f; a higher tensor_parallel or engine.gpu_memory_utilization gives more)",
				err, blocks, r.HW.Name, max(1, r.Shape.TP), e.GPUMemoryUtilization))
		}
		return nil, err
	}
	pr, err := pricing.Price(pricing.Spec{Hardware: r.HW, Shape: r.Shape, FPM: sc.FPM, Host: sc.Host, EngineVersion: e.VLLMVersion,
		AttentionBackend: e.AttentionBackend, CUDAGraphSizes: e.CUDAGraphSizes})
	if err != nil {
		return nil, fmt.Errorf("fpm: %w", err)
	}
	p.Models = *pr
	return p, nil
}
