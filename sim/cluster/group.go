package cluster

import (
	"fmt"

	"github.com/steplab/steplab/fpm"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/sched"
)

// group is one data-parallel + expert-parallel instance: its ranks are
// engines with their own schedulers and KV caches that run every forward
// pass together, because each layer's experts are spread over all of them
// (vLLM's DPEngineCoreProc: every rank enters each step's collectives; a
// rank with nothing to run executes a dummy batch).
//
// Each rank's step joins a wave: the wave starts when the GPUs are free
// and every rank's step is ready (its inputs prepared), and lasts
//
//	max over ranks of the rank's own forward pass (its FPM, priced on the
//	    dense part of the model)
//	+ the experts of all ranks' tokens on the busiest GPU (moePricer)
//	+ the all-to-all dispatch and combine (moePricer),
//
// so the ranks step together and the slowest sets the pace. A wave forms
// once every rank has a step waiting, or is quiet (its loop went idle, or
// could schedule nothing): a quiet rank runs a dummy step, a one-token
// forward pass, and so joins the wave only from the end of the previous
// one, as its loop would.
type group struct {
	c       *Cluster
	ranks   []*rank
	fpModel fpm.FPM
	moe     *moePricer
	dummyNs float64
	// gpus runs the waves (the ranks' CPUs are their own); formAt is the
	// time of a pending formation event (-1: none).
	gpus   sim.HostPipeline
	formAt int64
	idx    int32
	u      *unit // its ranks' unit, stepping side by side
}

func newGroup(c *Cluster, idx int, p *PoolPlan) *group {
	pl := p.Engine
	g := &group{c: c, fpModel: pl.FPM, moe: p.moe, formAt: -1, idx: int32(idx)}
	g.dummyNs = g.fpModel.PredictNs(fpm.Features{DecodeRequests: 1, PaddedBatch: 1})
	return g
}

// pendingStep is a rank's step submitted and not yet in a wave.
type pendingStep struct {
	id                 int64
	f                  fpm.Features
	ready              int64 // inputs prepared on the worker
	recv, prep, padded int64
	output             int64 // the rank's output path after the wave
	denseNs            float64
}

// rank is one engine's executor in a group: sim.Executor to its engine.
// Its worker's CPU is its own; its GPU joins the group's waves.
type rank struct {
	g      *group
	w      *worker
	worker sim.Worker
	pend   []pendingStep
	ph     int
	done   []sim.StepResult
	dh     int
}

func (r *rank) hasPending() bool { return r.ph < len(r.pend) }

// Submit implements sim.Executor.
func (r *rank) Submit(out *sched.Output, now int64) (sim.Payload, error) {
	c := sim.Compose(out)
	return r.SubmitComposed(out, &c, now)
}

// SubmitComposed prices the step's payload and input preparation on the
// rank's worker CPU and its own forward pass, and queues it for a wave.
func (r *rank) SubmitComposed(out *sched.Output, c *sim.Composition, now int64) (sim.Payload, error) {
	f := c.Features
	h := r.worker.Prepare(out, c, &f, now)
	dense := r.g.fpModel.PredictNs(f)
	if !(dense > 0) {
		return h.Payload, fmt.Errorf("FPM predicted a non-positive device time (%g ns) for a %s step", dense, f.Kind())
	}
	if r.ph > 64 && r.ph*2 > len(r.pend) {
		n := copy(r.pend, r.pend[r.ph:])
		r.pend, r.ph = r.pend[:n], 0
	}
	r.pend = append(r.pend, pendingStep{id: out.StepID, f: f, ready: h.Ready, recv: h.RecvNs, prep: h.PrepNs, padded: h.Padded,
		output: h.OutputNs, denseNs: dense})
	return h.Payload, nil
}

// Result implements sim.Executor: a step whose wave has not formed yet is
// not ready and has no known time (wake -1); the cluster wakes the engine
// when its wave forms.
func (r *rank) Result(stepID int64, now int64, _ bool) (sim.StepResult, bool, int64, error) {
	if r.dh < len(r.done) && r.done[r.dh].StepID == stepID {
		res := r.done[r.dh]
		if res.TOutput > now {
			return res, false, res.TOutput, nil
		}
		r.dh++
		if r.dh > 64 && r.dh*2 > len(r.done) {
			n := copy(r.done, r.done[r.dh:])
			r.done, r.dh = r.done[:n], 0
		}
		return res, true, res.TOutput, nil
	}
	if r.hasPending() && r.pend[r.ph].id == stepID {
		return sim.StepResult{}, false, -1, nil
	}
	return sim.StepResult{}, false, 0, fmt.Errorf("expert-parallel rank %s: step %d is not the oldest in flight", r.w.name, stepID)
}

// Close implements sim.Executor.
func (r *rank) Close() error { return nil }

// tryForm forms every wave that can form at now.
func (g *group) tryForm(now int64) {
	for g.formAt < 0 {
		real, quiet := false, false
		for _, r := range g.ranks {
			switch {
			case r.hasPending():
				real = true
			case r.w.wakeAt >= 0:
				return // its loop is running or awaits a known output: it will submit or go quiet
			default:
				quiet = true
			}
		}
		if !real {
			return
		}
		if quiet && now < g.gpus.GPUFree {
			// A quiet rank's loop reaches its dummy step when the last
			// wave ends; a request arriving before then still joins.
			g.formAt = g.gpus.GPUFree
			g.c.schedule(g.u, g.gpus.GPUFree, evForm, g.idx)
			return
		}
		g.form()
	}
}

// form makes the next wave of every rank's oldest pending step (or a
// dummy) and wakes the ranks that wait for it.
func (g *group) form() {
	var ready int64
	var dense, tokens, most float64
	for _, r := range g.ranks {
		t := 1.0 // a dummy step's token
		d := g.dummyNs
		if r.hasPending() {
			p := &r.pend[r.ph]
			ready = max(ready, p.ready)
			t, d = stepTokens(&p.f), p.denseNs
		}
		dense = max(dense, d)
		tokens += t
		most = max(most, t)
	}
	total := dense + g.moe.expertNs(tokens) + g.moe.a2aNs(most)
	dev := int64(total + 0.5)
	start, end := g.gpus.Run(ready, dev)
	if h := g.c.waveHook; h != nil {
		ids := make([]int64, len(g.ranks))
		for i, r := range g.ranks {
			ids[i] = -1
			if r.hasPending() {
				ids[i] = r.pend[r.ph].id
			}
		}
		h(g.idx, start, end, ids)
	}
	for _, r := range g.ranks {
		if !r.hasPending() {
			continue
		}
		p := r.pend[r.ph]
		r.ph++
		done := end + p.output
		if r.worker.Serial {
			r.worker.CPUFree = max(r.worker.CPUFree, done)
		}
		out := done + sim.OutputReturnNs
		r.done = append(r.done, sim.StepResult{StepID: p.id, TOutput: out, GPUTimeNs: dev, HostPrepNs: p.prep,
			WorkerRecvNs: p.recv, SampleNs: datasets.Unknown, PaddedBatch: p.padded})
		if r.w.eng.Waiting() && r.w.wakeAt < 0 {
			g.c.wake(r.w, out)
		}
	}
}
