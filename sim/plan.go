package sim

import (
	"errors"
	"fmt"
	"slices"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/catalog/manifest"
	"github.com/steplab/steplab/pricing"
	"github.com/steplab/steplab/sim/sched"
)

// Plan is a validated scenario, ready to run: the priced models (Pricing),
// the scheduler limits, the async mode and the CUDA-graph sizes of one
// engine, and the scenario it came from.
type Plan struct {
	Scenario Scenario
	pricing.Pricing
	Sched  sched.Config
	Async  bool
	Graphs []int
}

// Plan checks the scenario and resolves its catalogue names and model
// specs, refusing anything that could not run with a message that says what
// to change.
func (sc Scenario) Plan() (*Plan, error) {
	p, err := sc.EnginePlan()
	if err != nil {
		return nil, err
	}
	if err := sc.Workload.check(p.Sched); err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	return p, nil
}

// PlanOn is Plan with the hardware and model shape given rather than looked
// up by name (a GPU or model the catalogue does not know, or the part of a
// mixture of experts every token runs: see package sim/cluster).
func (sc Scenario) PlanOn(hw catalog.Hardware, shape catalog.Shape) (*Plan, error) {
	p, err := sc.EnginePlanOn(hw, shape)
	if err != nil {
		return nil, err
	}
	if err := sc.Workload.check(p.Sched); err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	return p, nil
}

// EnginePlanOn is PlanOn without the workload.
func (sc Scenario) EnginePlanOn(hw catalog.Hardware, shape catalog.Shape) (*Plan, error) {
	return sc.planOn(manifest.Resolved{HW: hw, Shape: shape, HWKnown: true, ShapeKnown: true})
}

// EnginePlan is Plan without the workload: the engine alone, for callers
// that bring their own arrivals (request replay, what-if stages).
func (sc Scenario) EnginePlan() (*Plan, error) {
	hw, shape, err := sc.Lookup()
	if err != nil {
		return nil, err
	}
	return sc.EnginePlanOn(hw, shape)
}

// Lookup resolves the scenario's hardware and model in the catalogue (a
// name in any spelling, or a spec file or config.json path) and applies
// its tensor parallelism and dtypes: what EnginePlan prices, for a caller
// that prices a part of the model itself (sim/cluster's experts).
func (sc Scenario) Lookup() (catalog.Hardware, catalog.Shape, error) {
	var errs []error
	hw, err := catalog.LookupHardware(sc.Hardware)
	if err != nil {
		errs = append(errs, catalog.AtKey("hardware", err))
	}
	shape, err := sc.shape()
	if err != nil {
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
	if sc.TensorParallel > 0 {
		s = s.WithTP(sc.TensorParallel)
	}
	if s, err = s.WithDTypes(sc.WeightDType, sc.KVCacheDType); err != nil {
		return s, fmt.Errorf("weight_dtype/kv_cache_dtype: %w", err)
	}
	if err := s.Validate(); err != nil {
		return s, fmt.Errorf("tensor_parallel: %w", err)
	}
	return s, nil
}

// planOn is the one place an engine is planned, from a scenario or from a
// manifest (PlanFromManifest).
func (sc Scenario) planOn(r manifest.Resolved) (*Plan, error) {
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
	blocks := e.NumGPUBlocks
	if blocks == 0 {
		var err error
		// The refusal names the model, the GPU and what to change.
		if blocks, err = catalog.KVBlocks(r.HW, r.Shape, e.BlockSize, e.GPUMemoryUtilization, 0); err != nil {
			return nil, err
		}
	}
	p := &Plan{Scenario: sc, Async: e.AsyncScheduling, Graphs: e.CUDAGraphSizes}
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
	pr, err := pricing.Price(pricing.Spec{Hardware: r.HW, Shape: r.Shape, FPM: sc.FPM, Host: sc.Host, EngineVersion: e.VLLMVersion, CUDAGraphSizes: e.CUDAGraphSizes})
	if err != nil {
		return nil, fmt.Errorf("fpm: %w", err)
	}
	p.Pricing = *pr
	return p, nil
}

// NewEngine builds the plan's engine, writing to sink: the one engine
// constructor of simulate, capture, request replay, calibrate, what-if and
// sweeps. A Backend without an executor runs the plan's simulated executor
// on a virtual clock; a capture brings its GPU executor and wall clock.
func (p *Plan) NewEngine(b Backend, sink Sink) (*Engine, error) {
	if b.Exec == nil {
		b.Exec, b.Clock, b.Host = NewSimExecutor(p.FPM, p.Payload, p.Host, p.Graphs), &VirtualClock{}, &HostAdapter{M: p.Host}
	}
	worker := b.WorkerID
	if worker == "" {
		worker = "sim-0"
	}
	return NewEngine(EngineConfig{Sched: p.Sched, Async: p.Async, WorkerID: worker, DPRank: b.DPRank}, b.Exec, b.Clock, b.Host, sink)
}
