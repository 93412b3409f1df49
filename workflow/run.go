package workflow

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/cluster"
	"github.com/steplab/steplab/sim/des"
	"github.com/steplab/steplab/sim/rng"
	"github.com/steplab/steplab/sim/workload"
)

// Load kinds (Load.Kind).
const (
	LoadConstant = workload.ProcessConstant
	LoadPoisson  = workload.ProcessPoisson
	LoadGamma    = workload.ProcessGamma
	LoadClosed   = "closed"
	LoadTrace    = "trace"
)

// Load is what the client sends.
type Load struct {
	// Kind: constant, poisson, gamma (open loop) or closed.
	Kind string
	// RateRPS is the open loop's rate; CV the gamma process's coefficient
	// of variation.
	RateRPS, CV float64
	// Users, Think ("fixed" | "exponential") and ThinkNs configure a closed
	// loop.
	Users   int
	Think   string
	ThinkNs int64
	// Requests measured, after Warmup warm-up requests.
	Requests, Warmup int
	// StartupNs is the process start-up before the first request; DrainNs
	// the time after the last response until the process ends.
	StartupNs, DrainNs int64
	// TimeoutNs is the client's deadline per request (0 = none).
	TimeoutNs int64
	// Lengths draws each request's prompt and output tokens.
	Lengths workload.Lengths
	// Trace, for Kind trace, is the recorded workload replayed instead:
	// its arrivals, lengths and prefix hashes (scenario.OpenTrace), mapped to
	// engine blocks of BlockSize tokens; a request longer than MaxModelLen
	// (> 0) refuses the trace, as simulate does.
	Trace                  *scenario.WorkloadSpec
	BlockSize, MaxModelLen int
}

// Request statuses.
const (
	StatusOK         = "ok"
	StatusTimeout    = "timeout"
	StatusRejected   = "rejected"
	StatusUnfinished = "unfinished"
)

// StageTimes is a request's passage through one stage, ns since the run's
// start; -1 where it did not happen.
type StageTimes struct {
	// ArriveNs: the input (for a join: the last input) reached the stage.
	ArriveNs int64
	// StartNs: a worker took it (an engine: the arrival was handed to it).
	StartNs int64
	// EndNs: the stage finished and sent its messages on.
	EndNs int64
	// FirstTokenNs: an engine's first output token.
	FirstTokenNs int64
}

// LatencyNs is EndNs − ArriveNs, or -1.
func (s StageTimes) LatencyNs() int64 {
	if s.EndNs < 0 || s.ArriveNs < 0 {
		return -1
	}
	return s.EndNs - s.ArriveNs
}

// Request is one request's record.
type Request struct {
	// Index is the request's position in arrival order; ID its load ID.
	Index  int
	ID     string
	Warmup bool
	// ArrivalNs: the client sent it. ResponseNs: the response reached the
	// client (or the deadline passed: a timeout; or the request was
	// rejected), -1 if neither happened.
	ArrivalNs, ResponseNs      int64
	PromptTokens, OutputTokens int
	Status                     string
	// Stages, in the order of Graph.Stages.
	Stages []StageTimes
	// hashes are the prompt's prefix hashes (a trace's), for a KV-aware
	// router.
	hashes []uint64
	// Where a rejection happened.
	RejectedBy string

	pending []int // inputs still awaited per stage (joins, the frontend's responses)
	failed  bool
}

// E2ENs is ResponseNs − ArrivalNs for an answered request, or -1.
func (r *Request) E2ENs() int64 {
	if r.Status != StatusOK {
		return -1
	}
	return r.ResponseNs - r.ArrivalNs
}

// Result is one run.
type Result struct {
	Requests []Request
	// ProcessEndNs is the whole process's wall: last response + DrainNs.
	ProcessEndNs int64
	// Events fired by the discrete-event core.
	Events uint64
	// EngineStats per engine stage, by stage name (a cluster's summed).
	EngineStats map[string]sim.Stats
}

// Run simulates one fresh server under the load, with every random draw
// from streams derived from r. The graph must be valid (Validate).
func Run(g *Graph, load Load, r *rng.Stream) (*Result, error) {
	if errs := g.Validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	w := &world{g: g, load: load, fe: g.Frontend(), res: &Result{EngineStats: map[string]sim.Stats{}}}
	w.inputs = make([]int, len(g.Stages))
	w.edges = make([][]int, len(g.Stages))
	for i := range g.Stages {
		for _, e := range g.Stages[i].To {
			j := g.Index(e.To)
			w.inputs[j]++
			w.edges[i] = append(w.edges[i], j)
		}
	}
	w.stages = make([]stageState, len(g.Stages))
	for i := range g.Stages {
		s := &g.Stages[i]
		st := &w.stages[i]
		st.rand = r.Derive("stage/" + s.Name)
		if s.Kind == KindEngine {
			c, err := s.Engine.New(cluster.Tee{&engineSink{w: w, stage: i}}, st.rand.Derive("cluster"))
			if err != nil {
				return nil, fmt.Errorf("stage %s: %w", s.Name, err)
			}
			st.cl = c
		}
	}
	src, done, err := newSource(load, r.Derive("load"))
	if err != nil {
		return nil, err
	}
	defer done()
	w.src = src
	w.completer, _ = src.(workload.Completer)
	w.schedulePump()
	if err := w.sim.Run(des.Forever); err != nil {
		return nil, err
	}
	if err := w.src.Err(); err != nil {
		return nil, err
	}
	last := load.StartupNs
	for i := range w.res.Requests {
		q := &w.res.Requests[i]
		if q.Status == "" {
			q.Status = StatusUnfinished
		}
		last = max(last, q.ResponseNs)
		q.pending = nil
	}
	w.res.ProcessEndNs = last + load.DrainNs
	w.res.Events = w.sim.Fired()
	for i := range g.Stages {
		if c := w.stages[i].cl; c != nil {
			if c.Busy() {
				return nil, fmt.Errorf("stage %s: engine still busy when the simulation ended", g.Stages[i].Name)
			}
			w.res.EngineStats[g.Stages[i].Name] = c.Stats()
		}
	}
	return w.res, nil
}

func newSource(l Load, r *rng.Stream) (workload.Peeker, func(), error) {
	none := func() {}
	switch l.Kind {
	case LoadClosed:
		s, err := workload.NewClosedLoop(workload.ClosedLoopConfig{Users: l.Users, Think: l.Think, ThinkNs: l.ThinkNs,
			Requests: l.Requests, WarmupRequests: l.Warmup, StartNs: l.StartupNs, Lengths: l.Lengths, Rand: r})
		return s, none, err
	case LoadTrace:
		if l.Trace == nil {
			return nil, none, fmt.Errorf("load kind trace without a trace")
		}
		s, _, done, err := scenario.OpenTrace(*l.Trace, l.BlockSize, l.MaxModelLen)
		if err != nil {
			return nil, none, err
		}
		return &shifted{Peeker: s, by: l.StartupNs}, done, nil
	default:
		s, err := workload.NewOpenLoop(workload.OpenLoopConfig{Process: l.Kind, RateRPS: l.RateRPS, CV: l.CV,
			Requests: l.Requests, WarmupRequests: l.Warmup, StartNs: l.StartupNs, Lengths: l.Lengths, Rand: r})
		return s, none, err
	}
}

// shifted delays a trace's arrivals by the process start-up.
type shifted struct {
	workload.Peeker
	by int64
}

func (s *shifted) NextAt() (int64, workload.Status) {
	t, st := s.Peeker.NextAt()
	return t + s.by, st
}

func (s *shifted) Next() (workload.Arrival, bool) {
	a, ok := s.Peeker.Next()
	a.AtNs += s.by
	return a, ok
}

type stageState struct {
	rand  *rng.Stream
	busy  int
	queue []int // request indices waiting for a worker, FIFO
	qhead int
	cl    *cluster.Cluster
	wake  wakeup // the cluster's next event
}

type world struct {
	g      *Graph
	load   Load
	fe     int
	sim    des.Sim
	stages []stageState
	inputs []int
	edges  [][]int
	res    *Result

	src       workload.Peeker
	completer workload.Completer
	pumpAt    wakeup // the source's next arrival
}

// wakeup keeps one pending event, at the earliest time asked for: a later
// request is dropped (the earlier event comes first and asks again), an
// earlier one supersedes the pending event.
type wakeup struct {
	at  int64
	gen uint64
	set bool // an event is pending at at
}

func (k *wakeup) keep(s *des.Sim, at int64, fn des.Handler) {
	if k.set && k.at <= at {
		return
	}
	k.gen++
	gen := k.gen
	k.at, k.set = at, true
	s.Schedule(at, func(now int64) {
		if gen != k.gen {
			return // superseded by an earlier one
		}
		k.set = false
		fn(now)
	})
}

// schedulePump keeps one wake-up at the source's next arrival.
func (w *world) schedulePump() {
	at, st := w.src.NextAt()
	if st != workload.Ready {
		return
	}
	w.pumpAt.keep(&w.sim, max(at, w.sim.Now()), w.pump)
}

func (w *world) pump(now int64) {
	for {
		at, st := w.src.NextAt()
		if st != workload.Ready || at > now {
			break
		}
		a, _ := w.src.Next()
		w.arrive(a, now)
	}
	w.schedulePump()
}

func (w *world) arrive(a workload.Arrival, now int64) {
	idx := len(w.res.Requests)
	q := Request{Index: idx, ID: a.ID, Warmup: a.Warmup, ArrivalNs: a.AtNs, ResponseNs: -1,
		PromptTokens: a.PromptTokens, OutputTokens: a.OutputTokens, hashes: a.PrefixHashes,
		Stages: make([]StageTimes, len(w.g.Stages)), pending: make([]int, len(w.g.Stages))}
	for i := range q.Stages {
		q.Stages[i] = StageTimes{-1, -1, -1, -1}
		q.pending[i] = w.inputs[i]
	}
	w.res.Requests = append(w.res.Requests, q)
	if t := w.load.TimeoutNs; t > 0 {
		w.sim.Schedule(a.AtNs+t, func(now int64) { w.timeout(idx, now) })
	}
	// The client talks to the frontend on its host: the request enters
	// the frontend as it is sent.
	w.enter(idx, w.fe, now)
}

func (w *world) req(i int) *Request { return &w.res.Requests[i] }

// deliver is a message of request i reaching stage j.
func (w *world) deliver(i, j int, now int64) {
	q := w.req(i)
	if q.failed {
		return
	}
	q.pending[j]--
	if q.pending[j] > 0 {
		return // a join (or the frontend) still waits for inputs
	}
	if j == w.fe {
		w.respond(i, now)
		return
	}
	w.enter(i, j, now)
}

// enter starts request i at stage j: its input is complete.
func (w *world) enter(i, j int, now int64) {
	q := w.req(i)
	q.Stages[j].ArriveNs = now
	s := &w.g.Stages[j]
	st := &w.stages[j]
	if s.Kind == KindEngine {
		q.Stages[j].StartNs = now
		if err := st.cl.Add(workload.Arrival{ID: strconv.Itoa(i), AtNs: now, PromptTokens: q.PromptTokens,
			OutputTokens: q.OutputTokens, PrefixHashes: q.hashes}); err != nil {
			w.sim.Fail(fmt.Errorf("stage %s: %w", s.Name, err))
			return
		}
		w.wakeCluster(j, now)
		return
	}
	if s.Workers == 0 || st.busy < s.Workers {
		w.start(i, j, now)
		return
	}
	if s.MaxQueue > 0 && len(st.queue)-st.qhead >= s.MaxQueue {
		w.reject(i, j, now)
		return
	}
	st.queue = append(st.queue, i)
}

func (w *world) start(i, j int, now int64) {
	q := w.req(i)
	s := &w.g.Stages[j]
	st := &w.stages[j]
	st.busy++
	q.Stages[j].StartNs = now
	d := s.Service.Draw(st.rand, q.PromptTokens, q.OutputTokens)
	w.sim.Schedule(now+d, func(now int64) { w.finish(i, j, now) })
}

func (w *world) finish(i, j int, now int64) {
	st := &w.stages[j]
	st.busy--
	// Hand the worker to the next waiting request, skipping cancelled ones.
	for st.qhead < len(st.queue) {
		k := st.queue[st.qhead]
		st.qhead++
		if st.qhead > 1024 && st.qhead*2 > len(st.queue) {
			st.queue = append(st.queue[:0], st.queue[st.qhead:]...)
			st.qhead = 0
		}
		if !w.req(k).failed {
			w.start(k, j, now)
			break
		}
	}
	w.send(i, j, now)
}

// send forwards request i's messages from stage j along its edges.
func (w *world) send(i, j int, now int64) {
	q := w.req(i)
	q.Stages[j].EndNs = now
	if q.failed {
		return
	}
	from := &w.g.Stages[j]
	for k, to := range w.edges[j] {
		d := w.g.Network.InlineNs
		if w.g.Stages[to].Host != from.Host {
			d = w.g.Network.HopNs(from.To[k].Bytes)
		}
		w.sim.Schedule(now+d, func(now int64) { w.deliver(i, to, now) })
	}
}

// wakeCluster keeps one event at an engine stage's next internal event
// (its engines' loops, expert-parallel waves, KV transfers).
func (w *world) wakeCluster(j int, now int64) {
	st := &w.stages[j]
	at := st.cl.NextAt()
	if at == sim.NoWake {
		return
	}
	st.wake.keep(&w.sim, max(at, now), func(now int64) {
		if err := st.cl.Advance(now); err != nil {
			w.sim.Fail(fmt.Errorf("stage %s: %w", w.g.Stages[j].Name, err))
			return
		}
		w.wakeCluster(j, now)
	})
}

// engineSink hears an engine's finished requests.
type engineSink struct {
	w     *world
	stage int
}

func (s *engineSink) Step(*datasets.Step, []datasets.StepRequest) error { return nil }

func (s *engineSink) Request(r *datasets.Request) error {
	i, err := strconv.Atoi(r.ReqID)
	if err != nil || i < 0 || i >= len(s.w.res.Requests) {
		return fmt.Errorf("engine reported unknown request %q", r.ReqID)
	}
	w, j := s.w, s.stage
	q := w.req(i)
	q.Stages[j].FirstTokenNs = r.FirstTokenNs
	at := max(r.FinishNs, w.sim.Now()) // the engine's host clock may run ahead of the event
	if r.Status != datasets.StatusFinished {
		w.sim.Schedule(max(at, 0), func(now int64) { w.reject(i, j, now) })
		return nil
	}
	w.sim.Schedule(at, func(now int64) { w.send(i, j, now) })
	return nil
}

func (w *world) reject(i, j int, now int64) {
	q := w.req(i)
	if q.failed || q.Status != "" {
		return
	}
	q.failed = true
	q.Status = StatusRejected
	q.RejectedBy = w.g.Stages[j].Name
	q.ResponseNs = now
	w.complete(q, now)
}

func (w *world) timeout(i int, now int64) {
	q := w.req(i)
	if q.Status != "" {
		return
	}
	q.failed = true
	q.Status = StatusTimeout
	q.ResponseNs = now
	w.complete(q, now)
}

func (w *world) respond(i int, now int64) {
	q := w.req(i)
	q.Status = StatusOK
	q.ResponseNs = now
	w.complete(q, now)
}

func (w *world) complete(q *Request, now int64) {
	if w.completer != nil {
		if err := w.completer.Complete(q.ID, now); err != nil {
			w.sim.Fail(err)
			return
		}
		w.schedulePump()
	}
}
