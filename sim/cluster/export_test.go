package cluster

import (
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/workload"
)

// What the external tests (package cluster_test, which plan through
// package scenario, an importer of this one) reach of the internals.

// Side is how a run may step its engines side by side.
type Side = side

// SideOf is a Side of jobs goroutines, windows of at least minEvents
// events, adapting every every arrivals.
func SideOf(jobs, minEvents, every int) Side {
	return side{jobs: jobs, minEvents: minEvents, every: every}
}

// Keeping is s with its units keeping kept rows in all ahead of the
// merger.
func (s Side) Keeping(kept int) Side {
	s.kept = kept
	return s
}

var (
	LastTime    = lastTime
	Jobs        = jobs
	DefaultSide = defaultSide
)

const (
	MinWindowEvents = minWindowEvents
	AdaptEvery      = adaptEvery
)

// RunOn is Run stepping the engines side by side as n allows.
func RunOn(p *Plan, job sim.Job, dir string, opts sim.RunOptions, n Side) (*sim.Result, error) {
	return runOn(p, job, dir, sim.Backend{}, opts, n)
}

// SimulateOn is Simulate stepping the engines side by side as n allows.
func SimulateOn(p *Plan, src workload.Peeker, n Side) (*sim.Result, error) {
	return simulate(p, sim.Job{Source: src}, sim.Backend{}, nil, sim.RunOptions{}, n)
}

// SetSide lets the cluster step its engines side by side as n allows.
func (c *Cluster) SetSide(n Side) { c.side = n }

// SetWaveHook hears of every wave of an expert-parallel instance.
func (c *Cluster) SetWaveHook(f func(g int32, start, end int64, steps []int64)) { c.waveHook = f }

// EntryLoads is, for each engine of the entry pool, what the kv router
// weighs of a prompt with hashes: the blocks it has cached, the prefill
// tokens routed to it and its KV blocks in use.
func (c *Cluster) EntryLoads(hashes []uint64) (overlap, prefill, kvUsed []float64) {
	for _, w := range c.entry.workers {
		overlap = append(overlap, float64(w.overlap(hashes)))
		prefill = append(prefill, float64(w.prefillTokens))
		kvUsed = append(kvUsed, float64(w.eng.Load().KVBlocksUsed))
	}
	return overlap, prefill, kvUsed
}
