package cluster

import (
	"math"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/internal/hist"
	"github.com/steplab/steplab/sim"
)

// Autoscale policies (datasets.PoolScaling.Policy).
const (
	// PolicyLoad sizes the pool so that each routable engine carries
	// target_load: its requests in flight over the interval (time-averaged)
	// per max_num_seqs, or its KV cache use at the decision, the larger.
	PolicyLoad = "load"
	// PolicySLO is PolicyLoad guarded by the interval's p90 TTFT and ITL
	// against the scenario's slo: above (1 − headroom)·slo it grows by one
	// engine (or to what the load asks); it shrinks, one engine a decision,
	// only below (1 − 2·headroom)·slo and when the load allows.
	PolicySLO = "slo"
)

// Autoscale defaults.
const (
	DefaultScaleIntervalS = 60.0
	DefaultTargetLoad     = 0.25
	DefaultHeadroom       = 0.2
	DefaultCooldownS      = 300.0
)

// Elastic reports whether the plan's engines can change during a run (a
// pool autoscales): engines are then added and removed between routing
// decisions, so the set a router chooses among is not fixed.
func (p *Plan) Elastic() bool {
	for _, pp := range p.Pools {
		if pp.Scaling != nil {
			return true
		}
	}
	return false
}

// maxReplicas is the most engines the pool may hold.
func (pp *PoolPlan) maxReplicas() int {
	if pp.Scaling != nil {
		return pp.Scaling.MaxReplicas
	}
	return pp.Replicas
}

// Engine states of an autoscaled pool (a fixed pool's are all serving).
const (
	stServing  uint8 = iota // routable
	stPending               // decided, not started (scale-up delay)
	stLoading               // holds its GPUs, loading the model
	stDraining              // no new requests; removed once its own finish
	stRemoved
)

// scaler is one autoscaled pool's planner and the record of its engines.
type scaler struct {
	datasets.PoolScaling
	pool      int32 // index in Cluster.pools
	ticking   bool  // a decision is scheduled
	lastScale int64 // the last decision that changed the pool
	pending   int   // engines decided, starting or loading
	live      int   // engines holding GPUs
	// The interval's measurements: the time integrals of the requests in
	// the pool's engines and of its routable engines, and the latencies of
	// the requests its engines finished.
	since               int64
	inFlight            int
	inFlightA, servingA float64
	ttft, itl           hist.Hist[hist.Nanos]
}

// startScaler records the pool's first engines (routable from 0: loaded
// before the run) and schedules its first decision.
func (c *Cluster) startScaler(pl *pool, idx int32) {
	s := &scaler{PoolScaling: *pl.Scaling, pool: idx}
	pl.scale = s
	s.live = len(pl.all)
	for _, w := range pl.all {
		s.Timeline = append(s.Timeline, datasets.ReplicaEvent{Worker: w.name, Event: "ready", Serving: s.live, Live: s.live})
	}
	s.ticking = true
	c.push(sec(s.IntervalS), evScale, idx)
}

// accrue integrates the pool's requests in flight and routable engines up
// to now (engines report finishes at their own clock, which may lead the
// cluster's: time never runs back).
func (s *scaler) accrue(pl *pool, now int64) {
	if dt := float64(now - s.since); dt > 0 {
		s.inFlightA += float64(s.inFlight) * dt
		s.servingA += float64(len(pl.workers)) * dt
		s.since = now
	}
}

// desired is the engine count the interval ending at now asks for.
func (s *scaler) desired(pl *pool) int {
	serving := len(pl.workers)
	load := 0.0
	if s.servingA > 0 {
		load = s.inFlightA / s.servingA / float64(pl.Engine.Sched.MaxNumSeqs)
	}
	var kv float64
	for _, w := range pl.workers {
		l := w.eng.Load()
		kv += float64(l.KVBlocksUsed) / float64(max(1, l.KVBlocksTotal)) / float64(serving)
	}
	n := int(math.Ceil(float64(serving)*max(load, kv)/s.TargetLoad - 1e-9))
	if s.Policy != PolicySLO {
		return n
	}
	ratio := 0.0
	if o := s.SLOTTFTMs; o > 0 && pl.Role != RoleDecode {
		ratio = s.ttft.Quantile(0.9) / (o * 1e6)
	}
	if o := s.SLOITLMs; o > 0 && pl.Role != RolePrefill {
		ratio = max(ratio, s.itl.Quantile(0.9)/(o*1e6))
	}
	held := serving + s.pending
	switch bar := 1 - s.Headroom; {
	case ratio > bar:
		return max(n, held+1) // one more engine, or what the load asks
	case n < held && ratio > 1-2*s.Headroom:
		return held // between the bars: hold
	case n < held:
		return held - 1 // shrink one engine at a time
	}
	return n
}

// tick is a decision at now: grow or shrink the pool toward what the
// interval asked for, within [min, max], then start the next interval.
func (c *Cluster) tick(pl *pool, now int64) {
	s := pl.scale
	s.accrue(pl, now)
	want := min(max(s.desired(pl), s.MinReplicas), s.MaxReplicas)
	held := len(pl.workers) + s.pending
	switch {
	case want > held:
		s.lastScale = now
		for range want - held {
			c.scaleUp(pl, now)
		}
	case want < held && now-s.lastScale >= sec(s.CooldownS):
		// At most half the engines go in one decision: the load an engine
		// carries rises as its peers leave.
		s.lastScale = now
		c.scaleDown(pl, min(held-want, held/2), now)
	}
	s.inFlightA, s.servingA = 0, 0
	s.ttft, s.itl = hist.Hist[hist.Nanos]{}, hist.Hist[hist.Nanos]{}
	// Decide again while anything can still happen: events queued or
	// arrivals to come (Drive says). Otherwise the planner sleeps, so the
	// run can end (or its driver report why it stalled), until a request
	// is admitted again (a driver that does not say).
	s.ticking = c.err == nil && (c.q.Len() > 0 || c.arrivalsAhead)
	if s.ticking {
		c.push(now+sec(s.IntervalS), evScale, s.pool)
	}
}

// wakePlanner schedules a sleeping planner's next decision at the first
// interval boundary after now.
func (c *Cluster) wakePlanner(pl *pool, now int64) {
	s := pl.scale
	if s == nil || s.ticking {
		return
	}
	iv := sec(s.IntervalS)
	s.ticking = true
	c.push((now/iv+1)*iv, evScale, s.pool)
}

func sec(s float64) int64 { return int64(math.Round(s * 1e9)) }

// scaleUp decides one new engine: it starts after the scale-up delay.
func (c *Cluster) scaleUp(pl *pool, now int64) {
	w, err := c.newWorker(pl, len(pl.all))
	if err != nil {
		c.fail(err)
		return
	}
	w.state = stPending
	pl.scale.pending++
	c.push(now+sec(pl.scale.ScaleUpDelayS), evStart, w.idx)
}

// scaleDown removes n engines, the newest first: those not yet routable
// at once, then routable ones by draining (never the last one).
func (c *Cluster) scaleDown(pl *pool, n int, now int64) {
	for i := len(pl.all) - 1; i >= 0 && n > 0; i-- {
		if w := pl.all[i]; w.state == stPending || w.state == stLoading {
			pl.scale.pending--
			c.remove(w, now)
			n--
		}
	}
	for ; n > 0 && len(pl.workers) > 1; n-- {
		w := pl.workers[len(pl.workers)-1]
		pl.workers = pl.workers[:len(pl.workers)-1]
		w.state = stDraining
		c.record(w, now, "drain")
		c.drained(w, now)
	}
}

// started is an engine's start: it holds its GPUs and loads the model.
func (c *Cluster) started(w *worker, now int64) {
	if w.state != stPending { // cancelled before it started
		return
	}
	w.state, w.startNs = stLoading, now
	w.pool.scale.live++
	c.record(w, now, "start")
	c.push(now+sec(w.pool.scale.LoadTimeS), evReady, w.idx)
}

// ready makes a loaded engine routable.
func (c *Cluster) ready(w *worker, now int64) {
	if w.state != stLoading {
		return
	}
	pl := w.pool
	pl.scale.accrue(pl, now)
	pl.scale.pending--
	w.state = stServing
	pl.workers = append(pl.workers, w)
	c.record(w, now, "ready")
}

// drained removes a draining engine once no request of its own is left.
func (c *Cluster) drained(w *worker, now int64) {
	if w.state == stDraining && w.outstanding == 0 && w.inbound == 0 {
		c.remove(w, now)
	}
}

// remove ends an engine: it gives back its GPUs (one never started held
// none).
func (c *Cluster) remove(w *worker, now int64) {
	started := w.state != stPending
	w.state, w.endNs = stRemoved, now
	if started {
		w.pool.scale.live--
		c.record(w, now, "remove")
	} else {
		w.startNs = now
	}
}

func (c *Cluster) record(w *worker, now int64, event string) {
	s := w.pool.scale
	s.Timeline = append(s.Timeline, datasets.ReplicaEvent{AtS: float64(now) / 1e9, Worker: w.name, Event: event,
		Serving: len(w.pool.workers), Live: s.live})
}

// inFlight follows the requests in an autoscaled pool's engines (delta
// +1 admitted, −1 done) and removes a drained engine.
func (c *Cluster) inFlight(w *worker, now int64, delta int) {
	s := w.pool.scale
	if s == nil {
		return
	}
	s.accrue(w.pool, now)
	s.inFlight += delta
	if delta < 0 {
		c.drained(w, now)
	}
}

// measured hears a request an autoscaled pool's engine finished.
func (s *scaler) measured(r *datasets.Request) {
	if r.Status != datasets.StatusFinished || r.FirstTokenNs < 0 {
		return
	}
	s.ttft.Add(float64(r.FirstTokenNs - r.ArrivalNs))
	if r.OutputTokens > 1 {
		s.itl.Add(float64((r.FinishNs - r.FirstTokenNs) / (r.OutputTokens - 1)))
	}
}

// Service is the run's GPU time up to end and each autoscaled pool's
// record: a fixed engine holds its GPUs from 0 to end, an autoscaled one
// from its start to its removal (or end).
func (c *Cluster) Service(end int64) *sim.Service {
	var gpuNs float64
	out := &sim.Service{}
	for _, pl := range c.pools {
		tp := float64(max(1, pl.Engine.Shape.TP))
		var poolNs float64
		for _, w := range pl.all {
			if w.state == stPending {
				continue
			}
			stop := end
			if w.state == stRemoved {
				stop = min(end, w.endNs)
			}
			poolNs += float64(max(0, stop-w.startNs)) * tp
		}
		gpuNs += poolNs
		if s := pl.scale; s != nil {
			rec := s.PoolScaling
			rec.GPUHours = poolNs / 3.6e12
			out.Autoscaled = append(out.Autoscaled, rec)
		}
	}
	out.GPUHours = gpuNs / 3.6e12
	return out
}
