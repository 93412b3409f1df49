package cluster

import (
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/sim"
)

// sloSink counts the requests that meet an objective: finished, within
// its TTFT, and within its mean inter-token latency when they decoded more
// than one token.
type sloSink struct {
	slo SLOSpec
	n   sim.SLOAttainment
}

func (s *sloSink) Step(*datasets.Step, []datasets.StepRequest) error { return nil }

func (s *sloSink) Request(r *datasets.Request) error {
	s.n.Requests++
	if r.Status != datasets.StatusFinished || r.FirstTokenNs < 0 {
		return nil
	}
	if s.slo.TTFTMs > 0 && float64(r.FirstTokenNs-r.ArrivalNs) > s.slo.TTFTMs*1e6 {
		return nil
	}
	if s.slo.ITLMs > 0 && r.OutputTokens > 1 && float64(r.FinishNs-r.FirstTokenNs)/float64(r.OutputTokens-1) > s.slo.ITLMs*1e6 {
		return nil
	}
	s.n.Met++
	return nil
}

func (s *sloSink) attainment() *sim.SLOAttainment {
	a := s.n
	a.TTFTMs, a.ITLMs = s.slo.TTFTMs, s.slo.ITLMs
	if a.Requests > 0 {
		a.Attainment = float64(a.Met) / float64(a.Requests)
	}
	return &a
}

// recordScaling writes each autoscaled pool's record into the manifest,
// with every engine that ran.
func recordScaling(m *datasets.Manifest, pools []datasets.PoolScaling) {
	if m.Cluster == nil {
		return
	}
	for _, rec := range pools {
		for i := range m.Cluster.Pools {
			cp := &m.Cluster.Pools[i]
			if cp.Name != rec.Pool {
				continue
			}
			r := rec
			cp.Autoscale = &r
			cp.Workers = cp.Workers[:0]
			seen := map[string]bool{}
			for _, e := range rec.Timeline {
				if !seen[e.Worker] {
					seen[e.Worker] = true
					cp.Workers = append(cp.Workers, e.Worker)
				}
			}
		}
	}
}
