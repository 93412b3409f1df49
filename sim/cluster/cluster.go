package cluster

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/des"
	"github.com/steplab/steplab/sim/rng"
	"github.com/steplab/steplab/sim/workload"
)

// Cluster is engines behind a router on one virtual clock. Arrivals are
// routed as they come (Add); the engines' loops, the expert-parallel waves
// and the KV transfers are events the cluster fires in time order (Step,
// Advance). Everything it records goes to its Sink.
type Cluster struct {
	plan    *Plan
	pools   []*pool
	entry   *pool // where requests arrive: the aggregated or the prefill pool
	decode  *pool // the decode pool of a disaggregated cluster
	workers []*worker
	groups  []*group

	q   des.Heap[event] // by (time, sequence): equal times fire in the order scheduled
	seq uint64
	out Sink
	// lender is out's dataset writer when it lends the rows a step is
	// recorded in: the engines record into them in place.
	lender sim.RowLender
	// backend runs the one engine of a cluster built on a real worker
	// (the zero Backend: every engine on its simulated executor); clock,
	// then, is its clock, which moves by itself (nil: virtual time).
	backend sim.Backend
	clock   sim.Clock
	// solo is the engine of a cluster of one (Plan.Single): its loop's
	// wake is the only event there can be, so it is kept in the worker
	// (wakeAt) rather than in the heap, and firing it costs no more than
	// a loop written for one engine.
	solo *worker

	nextStep int64
	// arrivalsAhead: the workload has arrivals to come (its driver says),
	// so an autoscaler keeps deciding through idle stretches.
	arrivalsAhead bool
	track         bool // the cluster follows requests (flights): P/D, or a kv router's prefill load
	xfers         []xfer
	xferFree      []int32

	// OnFinish, when set, hears each request that finished (its last token
	// reached the client): a closed-loop source needs it.
	OnFinish func(id string, t int64) error
	err      error

	// waveHook, when set (tests), hears every expert-parallel wave: its
	// group, device start and end, and each rank's step id (-1: dummy).
	waveHook func(group int32, start, end int64, steps []int64)

	// side is how Drive may step the engines side by side between
	// routing decisions (zero: one event at a time); par, while it does,
	// the driver's state (parallel.go).
	side side
	par  *parallel
}

type pool struct {
	*PoolPlan
	// workers are the engines the router chooses among; all is every
	// engine the pool ran (an autoscaled pool's: loading, draining and
	// removed ones too).
	workers []*worker
	all     []*worker
	scale   *scaler // nil: a fixed pool
	router  router
	scores  []float64
	// record: routing here is a decision worth a row (more than one
	// engine to choose from); route is the row of the last.
	record bool
	route  Route
}

// worker is one engine and what the router tracks of it.
type worker struct {
	idx  int32
	name string
	pool *pool
	dp   int32
	eng  *sim.Engine
	// wakeAt is the time of the engine's pending loop event, -1 if none.
	wakeAt int64
	// outstanding: requests routed here and not finished; prefillTokens:
	// their uncached prompt tokens before their first token (kv router).
	outstanding   int
	prefillTokens int64
	// linkFree is when the engine's outgoing KV link is free.
	linkFree int64
	group    *group
	// Of an autoscaled pool: the engine's state, when it took and gave back
	// its GPUs, and the prompts in transfer to it.
	state          uint8
	startNs, endNs int64
	inbound        int
	// flights are the requests routed here that the cluster follows, by
	// id: each engine's own, so that engines stepped side by side share
	// no map.
	flights map[string]*flight
	// u is the unit the engine steps in when the cluster runs side by
	// side (nil: one event at a time).
	u *unit
	// runs counts the engine's loop runs, the only time its prefix cache
	// changes; memo is the last overlap asked.
	runs uint64
	memo overlapMemo
}

// overlapMemo is a prompt's cached leading blocks on a worker, valid while
// the worker's loop has not run since: the router, its route row and the
// kv router's prefill tracking ask at one instant.
type overlapMemo struct {
	first        *uint64 // the prompt's hashes
	n            int
	runs         uint64
	cachedBlocks int
}

// overlap is the prompt's leading blocks (hashes h) w's prefix cache holds.
func (w *worker) overlap(h []uint64) int {
	if len(h) == 0 {
		return 0
	}
	if m := &w.memo; m.first == &h[0] && m.n == len(h) && m.runs == w.runs {
		return m.cachedBlocks
	}
	o := w.eng.CachedPrefix(h)
	w.memo = overlapMemo{first: &h[0], n: len(h), runs: w.runs, cachedBlocks: o}
	return o
}

// flight is a request the cluster follows between engines, or whose
// prefill work a kv router tracks.
type flight struct {
	arr       workload.Arrival
	newTokens int64 // prefill tokens charged to its worker until its first token
	// Of the prefill engine, for the merged row of a disaggregated request.
	firstSched int64
	preempt    int32
	inTransfer bool
}

type xfer struct {
	f      *flight
	to     *worker
	row    Transfer
	active bool
}

// New builds the plan's engines, their routers and links, recording into
// out. Each pool's router draws from its own stream derived from r (nil:
// from the scenario's seed).
func (p *Plan) New(out Sink, r *rng.Stream) (*Cluster, error) { return p.newOn(sim.Backend{}, out, r) }

// newOn is New with the engine of a plan of one on b (the zero Backend:
// New's simulated executors).
func (p *Plan) newOn(b sim.Backend, out Sink, r *rng.Stream) (*Cluster, error) {
	if p.MaxSteps > 0 {
		out = Tee{out, &stepLimit{max: p.MaxSteps}}
	}
	c := &Cluster{plan: p, out: out, lender: lenderOf(out), backend: b}
	if b.Exec != nil {
		c.clock = b.Clock
	}
	root := r
	if root == nil {
		root = rng.New(p.Seed, "cluster")
	}
	track := false
	for _, pp := range p.Pools {
		pl := &pool{PoolPlan: pp}
		pl.router = newRouter(p.Router, pp.Role == RoleDecode, root.Derive("router/"+pp.Name))
		pl.scores = make([]float64, pp.maxReplicas())
		pl.record = pp.maxReplicas() > 1
		c.pools = append(c.pools, pl)
		switch pp.Role {
		case RoleDecode:
			c.decode = pl
		default:
			c.entry = pl
		}
		track = track || (p.Router.Name == RouterKV && pp.Role != RoleDecode)
		if err := c.addWorkers(pl); err != nil {
			return nil, err
		}
		if pp.Scaling != nil {
			c.startScaler(pl, int32(len(c.pools)-1))
		}
	}
	c.track = c.decode != nil || track
	if p.Single() {
		c.solo = c.workers[0]
	}
	if c.track {
		for _, w := range c.workers {
			w.flights = map[string]*flight{}
		}
	}
	return c, nil
}

func (c *Cluster) addWorkers(pl *pool) error {
	for i := 0; i < pl.Replicas; i++ {
		w, err := c.newWorker(pl, i)
		if err != nil {
			return err
		}
		pl.workers = append(pl.workers, w)
	}
	return nil
}

// newWorker builds the pool's engine i (its name's index), in the
// expert-parallel instance it belongs to.
func (c *Cluster) newWorker(pl *pool, i int) (*worker, error) {
	ep := max(1, pl.ExpertParallel)
	w := &worker{idx: int32(len(c.workers)), name: fmt.Sprintf("%s-%d", pl.Name, i), pool: pl, wakeAt: -1}
	b := c.backend
	if b.WorkerID == "" {
		b.WorkerID = w.name
	}
	if ep > 1 {
		if i%ep == 0 {
			c.groups = append(c.groups, newGroup(c, len(c.groups), pl.PoolPlan))
		}
		g := c.groups[len(c.groups)-1]
		w.group, w.dp = g, int32(i%ep)
		e := pl.Engine
		r := &rank{g: g, w: w, worker: sim.Worker{Payload: e.Payload, Host: e.Host, Graphs: e.Graphs}}
		r.worker.Serial = e.SerialWorker
		g.ranks = append(g.ranks, r)
		b = sim.Backend{Exec: r, Clock: &sim.VirtualClock{}, Host: &sim.HostAdapter{M: pl.Engine.Host}, WorkerID: w.name, DPRank: w.dp}
	}
	eng, err := pl.Engine.NewEngine(b, &workerSink{c: c, w: w})
	if err != nil {
		return nil, fmt.Errorf("pool %s: %w", pl.Name, err)
	}
	w.eng = eng
	if c.plan.Router.Name == RouterKV && pl.Role != RoleDecode {
		eng.OnFirstToken = func(id string, _ int64) { c.firstToken(w, id) }
	}
	if c.track { // an engine an autoscaler adds (New sets the first ones')
		w.flights = map[string]*flight{}
	}
	pl.all = append(pl.all, w)
	c.workers = append(c.workers, w)
	return w, nil
}

// Engines are the cluster's engines in pool order.
func (c *Cluster) Engines() []*sim.Engine {
	out := make([]*sim.Engine, len(c.workers))
	for i, w := range c.workers {
		out[i] = w.eng
	}
	return out
}

// Stats sums the engines' counts; a request counts as finished on the
// engine that ends it, and its prompt (and prefix hits) where it arrived.
func (c *Cluster) Stats() sim.Stats {
	var s sim.Stats
	for _, w := range c.workers {
		e := w.eng.Stats()
		s.Steps += e.Steps
		s.PrefillSteps += e.PrefillSteps
		s.DecodeSteps += e.DecodeSteps
		s.MixedSteps += e.MixedSteps
		s.Preemptions += e.Preemptions
		s.Rejected += e.Rejected
		s.ExtrapolatedOps += e.ExtrapolatedOps
		if w.pool.Role != RolePrefill {
			s.Finished += e.Finished
		}
		if w.pool.Role != RoleDecode {
			s.PromptTokens += e.PromptTokens
			s.PrefixHitTokens += e.PrefixHitTokens
		}
	}
	return s
}

// Busy reports whether any request is in an engine or in transfer.
func (c *Cluster) Busy() bool {
	for _, w := range c.workers {
		if w.eng.Busy() {
			return true
		}
	}
	for i := range c.xfers {
		if c.xfers[i].active {
			return true
		}
	}
	return false
}

// Add routes an arrival to an engine of the entry pool at its arrival time.
// Arrivals must come in non-decreasing AtNs, and after every event fired
// so far.
func (c *Cluster) Add(a workload.Arrival) error {
	if c.err != nil {
		return c.err
	}
	return c.add(a)
}

// add is Add: side by side, on the driving goroutine, its route and the
// wake it schedules are kept for the merger.
func (c *Cluster) add(a workload.Arrival) error {
	pl := c.entry
	w, r := c.choose(pl, a.ID, a.AtNs, a.PromptTokens, a.PrefixHashes)
	switch {
	case r == nil:
	case c.par != nil:
		c.par.arr.keepRoute(r)
	default:
		c.fail(c.out.Route(r))
	}
	if c.track {
		f := &flight{arr: a, firstSched: datasets.Unknown}
		if c.plan.Router.Name == RouterKV {
			bs := int64(w.eng.BlockSize())
			f.newTokens = max(0, int64(a.PromptTokens)-int64(w.overlap(a.PrefixHashes))*bs)
			w.prefillTokens += f.newTokens
		}
		w.flights[a.ID] = f
	}
	if c.decode != nil {
		a.OutputTokens = 1 // the prefill engine produces the first token only (max_tokens = 1)
	}
	return c.admit(w, a)
}

// choose routes one request among pl's engines and returns the decision's
// row, nil when it is not worth one (the caller records it).
func (c *Cluster) choose(pl *pool, id string, at int64, prompt int, hashes []uint64) (*worker, *Route) {
	if len(pl.workers) == 1 && !pl.record {
		return pl.workers[0], nil
	}
	scores := pl.scores[:len(pl.workers)]
	i := pl.router.route(&routeReq{id: id, at: at, prompt: prompt, hashes: hashes}, pl.workers, scores)
	w := pl.workers[i]
	if !pl.record {
		return w, nil
	}
	l := w.eng.Load()
	r := &pl.route
	*r = Route{ReqID: id, AtNs: at, Pool: pl.Name, Router: c.plan.routerName(), Worker: w.name, DPRank: w.dp,
		Candidates: int32(len(pl.workers)), OverlapBlocks: int64(w.overlap(hashes)), PromptBlocks: int64(len(hashes)),
		Outstanding: int64(w.outstanding), KVBlocksUsed: int64(l.KVBlocksUsed), Score: scores[i], Scores: scores}
	return w, r
}

// admit hands an arrival to an engine and wakes its loop if idle.
func (c *Cluster) admit(w *worker, a workload.Arrival) error {
	if err := w.eng.Add(a); err != nil {
		return fmt.Errorf("%s: %w", w.name, err)
	}
	w.outstanding++
	c.inFlight(w, a.AtNs, 1)
	c.wakePlanner(w.pool, a.AtNs)
	if w.wakeAt < 0 {
		c.wake(w, max(a.AtNs, w.eng.Now()))
	}
	return nil
}

func (c *Cluster) fail(err error) {
	if c.err == nil && err != nil {
		c.err = err
	}
}

// wake schedules w's loop at t (w has no pending loop event).
func (c *Cluster) wake(w *worker, t int64) {
	w.wakeAt = t
	if c.solo == nil {
		c.schedule(w.u, t, evWake, w.idx)
	}
}

// NextAt is the time of the next event, or sim.NoWake. On a clock that
// moves by itself (a real worker's) an event is due no earlier than now:
// the driver hands over every arrival due by then before the engine's
// loop runs, as it would at that virtual time.
func (c *Cluster) NextAt() int64 {
	at := sim.NoWake
	if c.solo != nil {
		if c.solo.wakeAt >= 0 {
			at = c.solo.wakeAt
		}
	} else if ev, ok := c.q.Peek(); ok {
		at = ev.at
	}
	if c.clock != nil && at != sim.NoWake {
		at = max(at, c.clock.Now())
	}
	return at
}

// Step fires the earliest event.
func (c *Cluster) Step() error {
	if c.err != nil {
		return c.err
	}
	if w := c.solo; w != nil {
		if w.wakeAt >= 0 {
			c.runWorker(w, w.wakeAt)
		}
		return c.err
	}
	ev, ok := c.q.Pop()
	if !ok {
		return nil
	}
	c.fire(ev)
	return c.err
}

// soloEvents bounds the loop runs runSolo makes before the drive loop
// looks at its stop channel again.
const soloEvents = 4096

// runSolo runs the loop of a cluster of one while it wakes before h, up
// to soloEvents times, and returns the time of the last run.
func (c *Cluster) runSolo(h int64) int64 {
	w := c.solo
	t := w.wakeAt
	for n := 0; n < soloEvents && c.err == nil && w.wakeAt >= 0 && w.wakeAt < h; n++ {
		t = w.wakeAt
		c.runWorker(w, t)
	}
	return t
}

// fire runs one event: on the cluster's queue, or on its unit's when the
// engines step side by side.
func (c *Cluster) fire(ev event) {
	switch ev.kind {
	case evWake:
		c.runWorker(c.workers[ev.idx], ev.at)
	case evForm:
		g := c.groups[ev.idx]
		g.formAt = -1
		g.tryForm(ev.at)
	case evTransfer:
		c.transferDone(ev.idx)
	case evScale:
		c.tick(c.pools[ev.idx], ev.at)
	case evStart:
		c.started(c.workers[ev.idx], ev.at)
	case evReady:
		c.ready(c.workers[ev.idx], ev.at)
	}
}

// Advance fires every event at or before t.
func (c *Cluster) Advance(t int64) error {
	for c.err == nil {
		if at := c.NextAt(); at == sim.NoWake || at > t {
			break
		}
		if err := c.Step(); err != nil {
			return err
		}
	}
	return c.err
}

func (c *Cluster) runWorker(w *worker, now int64) {
	w.wakeAt = -1
	w.runs++
	next, err := w.eng.Run(now)
	if err != nil {
		c.failIn(w.u, fmt.Errorf("%s: %w", w.name, err))
		return
	}
	if next != sim.NoWake {
		c.wake(w, max(next, now))
	}
	if w.group != nil {
		w.group.tryForm(now)
	}
}

// workerSink takes an engine's records into the cluster.
type workerSink struct {
	c *Cluster
	w *worker
}

// NextStep implements sim.RowLender: the engine records its step in the
// row its unit keeps it in (side by side), or in the dataset writer's.
func (s *workerSink) NextStep() *datasets.Step {
	if u := s.w.u; u != nil && u.running {
		return u.cur.nextStep()
	}
	if l := s.c.lender; l != nil {
		return l.NextStep()
	}
	return nil
}

// NextRows implements sim.RowLender, as NextStep.
func (s *workerSink) NextRows(n int) []datasets.StepRequest {
	if u := s.w.u; u != nil && u.running {
		return u.cur.nextRows(n)
	}
	if l := s.c.lender; l != nil {
		return l.NextRows(n)
	}
	return nil
}

// Step gives the step an id unique in the cluster (with one engine, its
// own), in the order the cluster's events fire: a unit stepping side by
// side keeps the step for the merger to number.
func (s *workerSink) Step(st *datasets.Step, rows []datasets.StepRequest) error {
	if u := s.w.u; u != nil && u.running {
		u.keepStep(s.w, st, rows)
		return nil
	}
	return s.c.step(st, rows)
}

// step numbers a step in the cluster and records it.
func (c *Cluster) step(st *datasets.Step, rows []datasets.StepRequest) error {
	id := c.nextStep
	c.nextStep++
	if st.StepID != id {
		st.StepID = id
		for i := range rows {
			rows[i].StepID = id
		}
	}
	return c.out.Step(st, rows)
}

func (s *workerSink) Request(r *datasets.Request) error { return s.c.requestDone(s.w, r) }

func (c *Cluster) firstToken(w *worker, id string) {
	if f := w.flights[id]; f != nil && f.newTokens > 0 {
		w.prefillTokens -= f.newTokens
		f.newTokens = 0
	}
}

// requestDone is an engine's row for a request it finished, aborted or
// gave up on: the request's own row, or (a prefill) the start of its KV
// transfer.
func (c *Cluster) requestDone(w *worker, r *datasets.Request) error {
	w.outstanding--
	if s := w.pool.scale; s != nil {
		s.measured(r)
		c.inFlight(w, w.eng.Now(), -1)
	}
	f := w.flights[r.ReqID] // nil map: nothing followed
	if f != nil {
		delete(w.flights, r.ReqID)
		if f.newTokens > 0 {
			w.prefillTokens -= f.newTokens
			f.newTokens = 0
		}
	}
	switch {
	case f == nil:
	case w.pool.Role == RolePrefill && r.Status == datasets.StatusFinished:
		f.firstSched, f.preempt = r.FirstScheduledNs, r.NumPreemptions
		if u := w.u; u != nil && u.running {
			u.keepHandoff(w, f, r.FinishNs) // the decode router places it in the merger
			return nil
		}
		return c.startTransfer(w, f, r.FinishNs)
	case w.pool.Role == RolePrefill:
		row := *r
		row.OutputTokens = int64(f.arr.OutputTokens)
		return c.request(w, &row)
	case w.pool.Role == RoleDecode:
		row := *r
		row.ArrivalNs, row.FirstScheduledNs = f.arr.AtNs, f.firstSched
		row.NumPreemptions += f.preempt
		if err := c.finished(&row); err != nil {
			return err
		}
		return c.request(w, &row)
	}
	if err := c.finished(r); err != nil {
		return err
	}
	return c.request(w, r)
}

// request records a request's row: now, or (a unit stepping side by side)
// when the replay reaches the event that ended it.
func (c *Cluster) request(w *worker, r *datasets.Request) error {
	if u := w.u; u != nil && u.running {
		u.keepRequest(w, r)
		return nil
	}
	return c.out.Request(r)
}

func (c *Cluster) finished(r *datasets.Request) error {
	if c.OnFinish != nil && r.Status == datasets.StatusFinished {
		return c.OnFinish(r.ReqID, r.FinishNs)
	}
	return nil
}

// startTransfer routes a prefilled request to a decode engine and moves
// its prompt KV there over the prefill engine's link, one transfer at a
// time.
func (c *Cluster) startTransfer(from *worker, f *flight, at int64) error {
	to, r := c.choose(c.decode, f.arr.ID, at, f.arr.PromptTokens, f.arr.PrefixHashes)
	if r != nil && c.err == nil {
		c.fail(c.out.Route(r))
	}
	bytes := int64(f.arr.PromptTokens) * c.plan.KVBytesPerToken
	start := max(at, from.linkFree)
	end := start + int64(math.Round(c.plan.KVLink.TransferNs(float64(bytes))))
	from.linkFree = end
	f.inTransfer = true
	to.inbound++
	var i int32
	if n := len(c.xferFree); n > 0 {
		i = c.xferFree[n-1]
		c.xferFree = c.xferFree[:n-1]
	} else {
		c.xfers = append(c.xfers, xfer{})
		i = int32(len(c.xfers) - 1)
	}
	c.xfers[i] = xfer{f: f, to: to, active: true,
		row: Transfer{ReqID: f.arr.ID, From: from.name, To: to.name, Bytes: bytes, StartNs: start, EndNs: end}}
	c.push(end, evTransfer, i)
	return nil
}

// transferDone admits a request to its decode engine with its prompt KV
// computed but the last token, which the decode engine recomputes to
// sample the first output token (vLLM's P/D connectors load
// prompt − 1 tokens).
func (c *Cluster) transferDone(i int32) {
	x := c.xfers[i]
	c.xfers[i] = xfer{}
	c.xferFree = append(c.xferFree, i)
	f := x.f
	f.inTransfer = false
	x.to.inbound--
	x.to.flights[f.arr.ID] = f
	c.fail(c.out.Transfer(&x.row))
	a := f.arr
	a.AtNs = x.row.EndNs
	a.PrecomputedTokens = a.PromptTokens - 1
	c.fail(c.admit(x.to, a))
}

// Finish reports every request still in an engine or in transfer as
// unfinished at t (the end of a run that stops before draining).
func (c *Cluster) Finish(t int64) error {
	for _, w := range c.workers {
		if err := w.eng.Finish(t); err != nil {
			return err
		}
	}
	var fs []*flight
	for i := range c.xfers {
		if c.xfers[i].active {
			fs = append(fs, c.xfers[i].f)
		}
	}
	slices.SortFunc(fs, func(a, b *flight) int { return strings.Compare(a.arr.ID, b.arr.ID) })
	for _, f := range fs {
		r := datasets.Request{ReqID: f.arr.ID, ArrivalNs: f.arr.AtNs, PromptTokens: int64(f.arr.PromptTokens),
			OutputTokens: int64(f.arr.OutputTokens), FirstScheduledNs: f.firstSched, FirstTokenNs: datasets.Unknown,
			FinishNs: datasets.Unknown, NumPreemptions: f.preempt, Status: datasets.StatusUnfinished}
		if err := c.out.Request(&r); err != nil {
			return err
		}
	}
	return nil
}

// Event kinds.
const (
	evWake     uint8 = iota // a worker's loop runs
	evForm                  // a group forms its next wave
	evTransfer              // a KV transfer ends
	evScale                 // an autoscaled pool's planner decides
	evStart                 // a new engine starts (takes its GPUs)
	evReady                 // a new engine has loaded: it becomes routable
)

type event struct {
	at   int64
	seq  uint64
	idx  int32
	kind uint8
}

// Before orders events by time, then by when they were scheduled.
func (e event) Before(o *event) bool {
	if e.at != o.at {
		return e.at < o.at
	}
	return e.seq < o.seq
}

func (c *Cluster) push(at int64, kind uint8, idx int32) {
	c.q.Push(event{at: at, seq: c.seq, idx: idx, kind: kind})
	c.seq++
}
