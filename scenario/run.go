package scenario

import (
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/cluster"
)

// Job is the plan's run: its workload's source (nil for a benchmark grid,
// then Bench), the dataset's manifest naming command, and the output
// block. cleanup removes what the source imported.
func (p *Plan) Job(command []string) (job sim.Job, cleanup func(), err error) {
	src, inputSHA, cleanup, err := p.Source()
	if err != nil {
		return sim.Job{}, func() {}, err
	}
	job = sim.Job{Source: src, Manifest: p.Manifest(command, inputSHA), StepRequests: p.Scenario.Output.StepRequests}
	if src == nil {
		job.Bench = p.Bench()
	}
	return job, cleanup, nil
}

// Run simulates the plan's workload and writes its dataset to dir
// (cluster.Run): the same plan and seed give a byte-identical dataset,
// and a scenario without a cluster block writes one engine's.
func Run(p *Plan, dir string, opts sim.RunOptions) (*sim.Result, error) {
	job, cleanup, err := p.Job(opts.Command)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	return cluster.Run(p.Plan, job, dir, opts)
}

// Execute runs the plan's one engine on a backend (a capture's GPU
// worker) and writes the dataset (cluster.Execute: the engine is a
// cluster of one, driven as simulate drives it).
func Execute(p *Plan, dir string, b sim.Backend, opts sim.RunOptions) (*sim.Result, error) {
	job, cleanup, err := p.Job(opts.Command)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	return cluster.Execute(p.Plan, job, dir, b, opts)
}

// Simulate runs the plan's workload and reports it, writing nothing
// (cluster.Simulate): a sweep point.
func Simulate(p *Plan) (*sim.Result, error) {
	src, _, cleanup, err := p.Source()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	return cluster.Simulate(p.Plan, sim.Job{Source: src}) // a benchmark grid is refused there
}

// Bounds re-simulates the plan's workload at the lower and the upper edge
// of its FPM's prediction interval at level, writing nothing
// (cluster.Bounds).
func Bounds(p *Plan, level float64) (*sim.LatencyInterval, error) {
	return cluster.Bounds(p.Plan, level, func() (sim.Job, func(), error) { return p.Job(nil) })
}
