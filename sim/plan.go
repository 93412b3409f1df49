package sim

import (
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/sim/sched"
)

// Plan is one engine, ready to run: the priced models (fpm.Models, which
// package pricing builds from a spec), the scheduler limits, the async
// mode and the CUDA-graph sizes. It is plain data: package scenario builds
// it from a scenario or a manifest; a program may fill it itself.
type Plan struct {
	fpm.Models
	Sched  sched.Config
	Async  bool
	Graphs []int
	// SerialWorker runs the simulated worker one step at a time
	// (HostPipeline.Serial).
	SerialWorker bool
}

// NewEngine builds the plan's engine, writing to sink: the one engine
// constructor of simulate, capture, request replay, calibrate, what-if and
// sweeps. A Backend without an executor runs the plan's simulated executor
// on a virtual clock; a capture brings its GPU executor and wall clock.
func (p *Plan) NewEngine(b Backend, sink Sink) (*Engine, error) {
	if b.Exec == nil {
		x := NewSimExecutor(p.FPM, p.Payload, p.Host, p.Graphs)
		x.Serial = p.SerialWorker
		b.Exec, b.Clock, b.Host = x, &VirtualClock{}, &HostAdapter{M: p.Host}
	}
	worker := b.WorkerID
	if worker == "" {
		worker = "sim-0"
	}
	return NewEngine(EngineConfig{Sched: p.Sched, Async: p.Async, WorkerID: worker, DPRank: b.DPRank}, b.Exec, b.Clock, b.Host, sink)
}
