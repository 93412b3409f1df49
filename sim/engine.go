package sim

import (
	"fmt"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/internal/slab"
	"github.com/steplab/steplab/sim/sched"
	"github.com/steplab/steplab/sim/workload"
)

// NoWake is returned by Engine.Run when the engine is idle and only an
// arrival can wake it.
const NoWake int64 = -1

// EngineConfig configures an Engine.
type EngineConfig struct {
	Sched sched.Config
	// Async selects vLLM's async scheduling (batch queue depth 2): step
	// N+1 is scheduled while step N runs. Otherwise the loop is synchronous.
	Async    bool
	WorkerID string
	DPRank   int32
}

// Clock is the engine's notion of host time. Under simulation host work
// advances a virtual clock by its modelled cost; under capture the wall
// clock moves by itself and Spend does nothing.
type Clock interface {
	Now() int64
	Spend(ns int64)
	// AdvanceTo moves the clock forward to t (never backward): the engine
	// waited for an output or an arrival.
	AdvanceTo(t int64)
}

// HostCosts prices the scheduler-side host work of a step. Nil under
// capture, where the work costs what it really costs.
type HostCosts interface {
	ScheduleNs(out *sched.Output) int64
	UpdateNs(out *sched.Output) int64
}

// Sink receives what the engine records. Rows are only valid during the
// call: a sink that keeps them must copy.
type Sink interface {
	Step(step *datasets.Step, reqs []datasets.StepRequest) error
	Request(req *datasets.Request) error
}

// RowLender is a sink that keeps the rows it is given. It lends the
// engine the rows its next step goes into, so that the step is recorded in
// place rather than recorded aside and copied by the sink (45 columns a
// step, 9 a scheduled request).
type RowLender interface {
	// NextStep returns the steps row the next Step call keeps, as it is
	// (the engine sets every field), or nil when it lends none this step.
	NextStep() *datasets.Step
	// NextRows returns the n step_requests rows the next Step call keeps,
	// as they are, or nil when the sink keeps none.
	NextRows(n int) []datasets.StepRequest
}

// LenderOf is the sink that lends step rows: s, or the first of a Tee's
// sinks that does (the others read the step from its row); nil if none.
func LenderOf(s Sink) RowLender {
	switch s := s.(type) {
	case RowLender:
		return s
	case Tee:
		for _, k := range s {
			if l := LenderOf(k); l != nil {
				return l
			}
		}
	}
	return nil
}

// Arrival is a request reaching the engine (see package workload).
type Arrival = workload.Arrival

// Engine is the host loop of a vLLM-style engine core: it feeds arrivals to
// the scheduler, dispatches steps to an executor (keeping up to two in
// flight under async scheduling, as vLLM's step_with_batch_queue does),
// reconciles outputs and records every step and request.
//
// Engine is driven from outside: Run(now) executes one loop iteration and
// returns when the loop next needs to run, so that a discrete-event driver
// can interleave several engines and other stages on one virtual clock, and
// a capture driver can run it against the wall clock.
type Engine struct {
	cfg      EngineConfig
	sch      *sched.Scheduler
	exec     Executor
	composed composedSubmitter // exec, when it is one
	clock    Clock
	host     HostCosts
	sink     Sink
	lender   RowLender // LenderOf(sink)
	depth    int

	pending  []Arrival // arrived or future, in AtNs order, not yet given to the scheduler
	pendHead int
	reqs     map[string]*reqState
	admitted slab.Slab[admitted] // the scheduler's and the engine's state of each request
	// inflight holds the steps in flight, the oldest at inflight[inHead]:
	// a ring, as at most depth (two) are, so that retiring the oldest does
	// not copy the other down.
	inflight      [2]inflightStep
	inHead, inLen int

	scheduled int64 // steps handed to the executor

	lastUpdateEnd int64
	lastStepID    int64 // the last step recorded (checkStep)
	idle          bool  // nothing ran since the last step's update: the next step follows idle
	waiting       bool  // blocked on the oldest in-flight step
	stats         Stats

	rowBuf []datasets.StepRequest
	step   datasets.Step // the step recorded, unless the sink lends a row
	// perReq holds the per-request payload of each step in flight: under
	// async scheduling step N+1 is submitted (and the executor may reuse
	// its PerReq memory) before step N is recorded. At most two steps are
	// in flight, so submission k uses buffer k mod 2.
	perReq    [2][]int64
	submitted int

	// Tag, when set, classifies each recorded step before it reaches the
	// sink (a benchmark marks measured and scaffolding steps).
	Tag func(step *datasets.Step, rows []datasets.StepRequest, out *sched.Output)

	// OnFirstToken, when set, hears each request's first output token (a
	// router tracks the prefill work it has sent until then).
	OnFirstToken func(id string, t int64)

	// Finished and preempted ids of empty scheduler outputs, shipped with
	// the next step.
	carryFinished, carryPreempted []string
}

type inflightStep struct {
	out        *sched.Output
	tSchedule  int64
	tSchedEnd  int64
	tDispatch  int64
	overlapped bool
	afterIdle  bool
	payload    Payload
	comp       Composition
}

// composedSubmitter is an executor that can reuse the engine's composition
// of a step (the simulated one).
type composedSubmitter interface {
	SubmitComposed(out *sched.Output, c *Composition, now int64) (Payload, error)
}

// admitted is a request as the engine admits it: the scheduler's view and
// the engine's, allocated together.
type admitted struct {
	r  sched.Request
	st reqState
}

type reqState struct {
	arr            Arrival
	firstScheduled int64
	firstToken     int64
	outputs        int
	preemptions    int32
	done           bool // finished: a step still in flight samples nothing more
}

// NewEngine builds an engine. host may be nil (capture).
func NewEngine(cfg EngineConfig, exec Executor, clock Clock, host HostCosts, sink Sink) (*Engine, error) {
	s, err := sched.New(cfg.Sched)
	if err != nil {
		return nil, err
	}
	depth := 1
	if cfg.Async {
		depth = 2
	}
	composed, _ := exec.(composedSubmitter)
	return &Engine{cfg: cfg, sch: s, exec: exec, composed: composed, clock: clock, host: host, sink: sink, lender: LenderOf(sink), depth: depth,
		reqs: map[string]*reqState{}, lastUpdateEnd: -1, lastStepID: -1, idle: true}, nil
}

// Stats counts what the engine did.
type Stats struct {
	Steps, PrefillSteps, DecodeSteps, MixedSteps int64
	Preemptions                                  int64
	Finished, Rejected                           int64
	// PromptTokens are the prompt tokens of the requests admitted, and
	// PrefixHitTokens those of them found in the prefix cache at their
	// first admission.
	PromptTokens, PrefixHitTokens int64
	// ExtrapolatedOps counts the operations the FPM priced past its
	// measured range (an executor that says: SimExecutor.ExtrapolatedOps).
	ExtrapolatedOps int64
}

// PrefixHitRate is PrefixHitTokens / PromptTokens (0 before any
// admission).
func (s Stats) PrefixHitRate() float64 {
	if s.PromptTokens == 0 {
		return 0
	}
	return float64(s.PrefixHitTokens) / float64(s.PromptTokens)
}

// Stats reports counts so far.
func (e *Engine) Stats() Stats {
	s := e.stats
	if x, ok := e.exec.(interface{ ExtrapolatedOps() int64 }); ok {
		s.ExtrapolatedOps = x.ExtrapolatedOps()
	}
	return s
}

// Add queues an arrival. Arrivals must come in non-decreasing AtNs.
func (e *Engine) Add(a Arrival) error {
	if n := len(e.pending); n > e.pendHead && e.pending[n-1].AtNs > a.AtNs {
		return fmt.Errorf("arrival %s at %d ns is before the previous one (%d ns)", a.ID, a.AtNs, e.pending[n-1].AtNs)
	}
	if e.pendHead > 1024 && e.pendHead*2 > len(e.pending) {
		e.pending = append(e.pending[:0], e.pending[e.pendHead:]...)
		e.pendHead = 0
	}
	e.pending = append(e.pending, a)
	return nil
}

// NextArrival is the time of the earliest queued arrival not yet admitted.
func (e *Engine) NextArrival() (int64, bool) {
	if e.pendHead < len(e.pending) {
		return e.pending[e.pendHead].AtNs, true
	}
	return 0, false
}

// Scheduled is the number of steps scheduled so far (in flight or done).
func (e *Engine) Scheduled() int64 { return e.scheduled }

// Now is the engine's host clock.
func (e *Engine) Now() int64 { return e.clock.Now() }

// Busy reports whether the engine has requests or steps in flight.
func (e *Engine) Busy() bool {
	return e.inLen > 0 || e.sch.HasUnfinished()
}

// Idle reports whether the engine's loop found nothing to run (its last
// Run returned NoWake) and nothing has arrived since: only an arrival
// wakes it. An idle engine that is Busy holds requests it cannot schedule.
func (e *Engine) Idle() bool { return e.idle && e.pendHead == len(e.pending) }

// Waiting reports whether the loop is blocked on the output of its oldest
// step in flight (the last Run returned that output's arrival time, or
// NoWake when the executor could not say it yet).
func (e *Engine) Waiting() bool { return e.waiting }

// Load is what a router can see of an engine: its queues and KV blocks
// now.
type Load struct {
	Waiting, Running            int
	KVBlocksUsed, KVBlocksTotal int
}

// Load reports the engine's queues (arrivals the loop has not admitted
// yet count as waiting) and the scheduler's KV usage.
func (e *Engine) Load() Load {
	return Load{Waiting: e.sch.NumWaiting() + len(e.pending) - e.pendHead, Running: e.sch.NumRunning(),
		KVBlocksUsed: e.sch.KVBlocksUsed(), KVBlocksTotal: e.sch.KVBlocksTotal()}
}

// CachedPrefix is the number of leading prompt blocks with these chain
// hashes the engine's prefix cache holds now (sched.Scheduler.CachedPrefix).
func (e *Engine) CachedPrefix(hashes []uint64) int { return e.sch.CachedPrefix(hashes) }

// BlockSize is the engine's KV block size in tokens.
func (e *Engine) BlockSize() int { return e.cfg.Sched.BlockSize }

func (e *Engine) admit(now int64) error {
	for e.pendHead < len(e.pending) && e.pending[e.pendHead].AtNs <= now {
		a := e.pending[e.pendHead]
		e.pendHead++
		if _, dup := e.reqs[a.ID]; dup {
			return fmt.Errorf("request %s arrived twice", a.ID)
		}
		ad := e.admitted.New()
		r, st := &ad.r, &ad.st
		r.ID, r.PromptTokens, r.MaxOutputTokens = a.ID, a.PromptTokens, a.OutputTokens
		r.BlockHashes, r.PrecomputedTokens = a.PrefixHashes, a.PrecomputedTokens
		st.arr, st.firstScheduled, st.firstToken = a, datasets.Unknown, datasets.Unknown
		r.Tag = st
		if err := e.sch.Add(r); err != nil {
			e.stats.Rejected++
			if err := e.sink.Request(&datasets.Request{ReqID: a.ID, ArrivalNs: a.AtNs, PromptTokens: int64(a.PromptTokens),
				OutputTokens: int64(a.OutputTokens), FirstScheduledNs: datasets.Unknown, FirstTokenNs: datasets.Unknown,
				FinishNs: datasets.Unknown, Status: datasets.StatusAborted}); err != nil {
				return err
			}
			continue
		}
		e.reqs[a.ID] = st
	}
	return nil
}

// Run executes one iteration of the engine loop at time now and returns
// when the loop must run next: now or later when it can go on, the arrival
// time of the oldest step's output when it blocks on it, or NoWake when it
// is idle.
func (e *Engine) Run(now int64) (int64, error) {
	e.clock.AdvanceTo(now)
	if !e.waiting {
		if err := e.admit(e.clock.Now()); err != nil {
			return NoWake, err
		}
		if e.sch.HasUnfinished() {
			scheduled, err := e.scheduleOne()
			if err != nil {
				return NoWake, err
			}
			if scheduled && e.inLen < e.depth {
				// Don't block on the oldest output unless the queue is full
				// (vLLM step_with_batch_queue): if it is not done yet, loop
				// and schedule again.
				r, ready, _, err := e.exec.Result(e.oldest().out.StepID, e.clock.Now(), false)
				if err != nil {
					return NoWake, err
				}
				if !ready {
					return e.clock.Now(), nil
				}
				return e.reconcile(r)
			}
		}
		if e.inLen == 0 {
			e.idle = true
			return NoWake, nil
		}
	}
	r, ready, wake, err := e.exec.Result(e.oldest().out.StepID, e.clock.Now(), true)
	if err != nil {
		return NoWake, err
	}
	if !ready {
		e.waiting = true
		return wake, nil
	}
	return e.reconcile(r)
}

// reconcile runs update_from_output for the oldest step in flight.
func (e *Engine) reconcile(r StepResult) (int64, error) {
	e.waiting = false
	// The scheduler receives an output when its loop asks for it: an output
	// that arrived while the loop was busy is received now (vLLM's
	// future.result(); Dynamo times update_from_output from there).
	r.TOutput = max(r.TOutput, e.clock.Now())
	e.clock.AdvanceTo(r.TOutput)
	if err := e.update(e.oldest(), r); err != nil {
		return NoWake, err
	}
	e.inHead = (e.inHead + 1) % len(e.inflight)
	e.inLen--
	return e.clock.Now(), nil
}

// oldest is the oldest step in flight.
func (e *Engine) oldest() *inflightStep { return &e.inflight[e.inHead] }

func (e *Engine) scheduleOne() (bool, error) {
	tStart := e.clock.Now()
	out := e.sch.Schedule()
	e.countPreemptions(out.PreemptedIDs)
	if out.Empty() {
		// Nothing to run, but the worker must still hear of requests that
		// finished or were preempted: they ride on the next step.
		e.carryFinished = append(e.carryFinished, out.FinishedIDs...)
		e.carryPreempted = append(e.carryPreempted, out.PreemptedIDs...)
		return false, nil
	}
	if len(e.carryFinished)+len(e.carryPreempted) > 0 {
		out.FinishedIDs = append(out.FinishedIDs, e.carryFinished...)
		out.PreemptedIDs = append(e.carryPreempted, out.PreemptedIDs...)
		e.carryFinished, e.carryPreempted = e.carryFinished[:0], nil
	}
	if e.host != nil {
		e.clock.Spend(e.host.ScheduleNs(out))
	}
	e.scheduled++
	tSchedEnd := e.clock.Now()
	overlapped := e.inLen > 0
	afterIdle := e.idle && !overlapped
	e.idle = false
	// The payload is handed over at t_dispatch, once serialized: a real
	// executor serializes inside Submit; the simulated one prices that
	// work, with the trip to the worker, on the worker's side.
	// The step is composed in its place in the in-flight queue: on the
	// stack, passed by pointer through an interface, the composition would
	// escape (one allocation a step), and a copy in the engine would be
	// copied again into the queue. The slot is cleared and set field by
	// field: a literal is built aside and copied, and the copy's wide
	// loads of fields just stored stall on store forwarding.
	st := &e.inflight[(e.inHead+e.inLen)%len(e.inflight)]
	e.inLen++
	*st = inflightStep{}
	st.out, st.tSchedule, st.tSchedEnd, st.overlapped, st.afterIdle = out, tStart, tSchedEnd, overlapped, afterIdle
	st.comp.compose(out)
	var p Payload
	var err error
	if e.composed != nil {
		p, err = e.composed.SubmitComposed(out, &st.comp, e.clock.Now())
	} else {
		p, err = e.exec.Submit(out, e.clock.Now())
	}
	if err != nil {
		e.inLen--
		return false, fmt.Errorf("step %d: %w", out.StepID, err)
	}
	k := e.submitted % len(e.perReq)
	e.perReq[k] = append(e.perReq[k][:0], p.PerReq...)
	p.PerReq = e.perReq[k]
	e.submitted++
	st.payload, st.tDispatch = p, e.clock.Now()
	for i := range out.NewReqs {
		sr := &out.NewReqs[i]
		if rs := stateOf(sr); rs.firstScheduled < 0 {
			rs.firstScheduled = tStart
			e.stats.PromptTokens += int64(sr.Req.PromptTokens)
			e.stats.PrefixHitTokens += int64(sr.PrefixHitTokens)
		}
	}
	return true, nil
}

// stateOf is the engine's state of a scheduled request.
func stateOf(sr *sched.ScheduledReq) *reqState { return sr.Req.Tag.(*reqState) }

func (e *Engine) countPreemptions(ids []string) {
	e.stats.Preemptions += int64(len(ids))
	for _, id := range ids {
		if st := e.reqs[id]; st != nil {
			st.preemptions++
		}
	}
}
