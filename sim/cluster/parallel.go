package cluster

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/sim/des"
)

// Side by side: a conservative parallel discrete-event simulation whose
// barriers are the router's decisions.
//
// Between two arrivals the router places nothing, and the engines of the
// pool requests arrive at share no state: each engine (or expert-parallel
// instance, whose ranks step in lock-step) is a unit with its own event
// queue, stepped by one goroutine up to the next arrival (events
// strictly before it: an arrival fires before an event at its time). Every
// router reads replica state at its decision (the route row records the
// chosen engine's load and prefix overlap, and least_requests, least_kv,
// session, kv and vllm_dp score every candidate's), so every unit is
// advanced exactly to each arrival before it is placed. A prefill engine
// depends on nothing downstream; the decode engines, the KV transfers and
// the decode router, which places a request when its prefill ends (an
// instant no barrier can fix in advance), fire one event at a time on the
// replaying goroutine: a prefill unit keeps the finished prefill as a
// handoff the replay places when it reaches it.
//
// A unit keeps what it records (steps, request rows, the events it
// schedules) in bounded chunks instead of writing it. The cluster's own
// queue still holds every event, in (time, order scheduled) order as a
// sequential run schedules them; the replay pops it and, for each event,
// writes the records its unit kept for it and schedules what it
// scheduled. A unit's events fire in its own queue in the order the
// cluster's queue would fire them (its pushes are numbered in the order
// they happen, which is the sequential order restricted to the unit), so
// the replay writes every record, step ids included, exactly as a
// sequential run: the dataset is byte-identical for any goroutine count.

// side is how a run may step its engines side by side: on up to jobs
// goroutines, while the windows between arrivals hold minEvents events on
// average over every arrivals (0: side by side throughout).
type side struct{ jobs, minEvents, every int }

// defaultSide is a run's: every processor, and side by side only where a
// window between two arrivals holds at least minWindowEvents events.
func defaultSide() side { return side{jobs: jobs(), minEvents: minWindowEvents, every: adaptEvery} }

// minWindowEvents is the mean events between two arrivals below which
// stepping side by side loses: a barrier's handoffs cost a few engine
// steps (16 replicas on the Azure conversation trace have about 210 a
// window, 64 replicas at 10 req/s each about 18). adaptEvery is the
// arrivals the mean is taken over before the driver chooses again.
const (
	minWindowEvents = 64
	adaptEvery      = 256
)

// pacer chooses, at arrivals, between one event at a time and side by
// side, from the events fired between the last adaptEvery arrivals. Both
// write the same records, so the choice changes only the speed.
type pacer struct {
	side             side
	on               bool // the plan and source allow side by side
	arrivals, events int
}

// arrival is called before each arrival, at a barrier (nothing in flight).
func (p *pacer) arrival(c *Cluster) {
	if !p.on {
		return
	}
	if p.side.minEvents == 0 && c.par == nil {
		c.enter(p.side.jobs) // side by side from the first arrival
	}
	p.arrivals++
	if p.arrivals < p.side.every {
		return
	}
	want := p.events >= p.side.minEvents*p.arrivals
	p.arrivals, p.events = 0, 0
	switch {
	case want && c.par == nil:
		c.enter(p.side.jobs)
	case !want && c.par != nil && c.par.quiet():
		c.exit()
	}
}

// chunkRows bounds what one chunk keeps (a step counts its step_requests
// rows and itself, a request row one) and maxPending the chunks a unit
// holds ahead of the replay: memory stays flat however long the run.
const (
	chunkRows  = 2048
	maxPending = 2
)

// jobs is how many goroutines a cluster run steps its engines on: the Go
// scheduler's processors, until the command's job count is resolved in
// one place.
func jobs() int { return runtime.GOMAXPROCS(0) }

// SequentialReason says why the plan's engines cannot step side by side
// between routing decisions, or "" when they can (more than one unit, an
// aggregated pool, an open-loop workload).
func (p *Plan) SequentialReason() string {
	// The entry pool's units, and the decode engines the replaying
	// goroutine steps.
	units := 0
	for _, pp := range p.Pools {
		if pp.Role == RoleDecode {
			units++
		} else {
			units += pp.Replicas / max(1, pp.ExpertParallel)
		}
	}
	switch {
	case p.Elastic():
		return "an autoscaled pool: its planner adds and removes engines between routing decisions, so the units are not fixed"
	case p.ClosedLoop:
		return "workload.kind closed: a user's next request waits on the finish of its last, so arrivals cannot be barriers fixed in advance"
	case units < 2:
		return "one engine or one expert-parallel instance: nothing steps beside it"
	}
	return ""
}

// unit is engines that step together: one engine, or the ranks of an
// expert-parallel instance. Its queue, engines and err belong to the
// goroutine stepping it while a chunk is in flight, and to the replay
// otherwise; pending and free are the replay's.
type unit struct {
	q   des.Heap[event]
	seq uint64
	// running: the unit is stepping, keeping its records in cur.
	running bool
	err     error
	cur     *chunk
	// A chunk in flight: task, handed to goroutine owner in a round;
	// filled hands it back.
	task     *chunk
	inFlight bool
	owner    int
	filled   chan *chunk
	pending  []*chunk // kept ahead of the replay, oldest first
	free     []*chunk
}

// chunk is what a unit kept for a run of its events.
type chunk struct {
	ents   []entry
	head   int // the next entry to replay
	recs   []rec
	steps  []datasets.Step
	rows   []datasets.StepRequest
	reqs   []datasets.Request
	hands  []handoff
	pushes []event
	size   int
}

// entry is one event a unit fired: the records and pushes it made.
type entry struct {
	ev             event
	recLo, recHi   int
	pushLo, pushHi int
	err            error
}

// rec is one kept record of engine w: a step (steps[i] with rows[lo:hi]),
// a request row (reqs[i]), or a prefilled request for the decode router
// (hands[i]).
type rec struct {
	kind         uint8
	w, i, lo, hi int32
}

// Kept record kinds.
const (
	recStep uint8 = iota
	recRequest
	recHandoff
)

// handoff is a request a prefill engine finished at at.
type handoff struct {
	f  *flight
	at int64
}

func (u *unit) keepStep(w *worker, st *datasets.Step, rows []datasets.StepRequest) {
	ch := u.cur
	lo := len(ch.rows)
	ch.steps = append(ch.steps, *st)
	ch.rows = append(ch.rows, rows...)
	ch.recs = append(ch.recs, rec{kind: recStep, w: w.idx, i: int32(len(ch.steps) - 1), lo: int32(lo), hi: int32(len(ch.rows))})
	ch.size += 1 + len(rows)
}

func (u *unit) keepRequest(w *worker, r *datasets.Request) {
	ch := u.cur
	k := *r
	k.PrefixHashIDs = slices.Clone(r.PrefixHashIDs)
	ch.reqs = append(ch.reqs, k)
	ch.recs = append(ch.recs, rec{kind: recRequest, w: w.idx, i: int32(len(ch.reqs) - 1)})
	ch.size++
}

func (u *unit) keepHandoff(w *worker, f *flight, at int64) {
	ch := u.cur
	ch.hands = append(ch.hands, handoff{f: f, at: at})
	ch.recs = append(ch.recs, rec{kind: recHandoff, w: w.idx, i: int32(len(ch.hands) - 1)})
	ch.size++
}

// advance fires the unit's events before h into ch, until ch is full.
func (u *unit) advance(c *Cluster, ch *chunk, h int64) {
	u.cur, u.running = ch, true
	for u.err == nil && ch.size < chunkRows {
		ev, ok := u.q.Peek()
		if !ok || ev.at >= h {
			break
		}
		u.q.Pop()
		e := entry{ev: ev, recLo: len(ch.recs), pushLo: len(ch.pushes)}
		c.fire(ev)
		e.recHi, e.pushHi, e.err = len(ch.recs), len(ch.pushes), u.err
		ch.ents = append(ch.ents, e)
	}
	u.cur, u.running = nil, false
}

// recycle returns the replayed oldest chunk to the free list.
func (u *unit) recycle() {
	ch := u.pending[0]
	u.pending = slices.Delete(u.pending, 0, 1)
	u.reuse(ch)
}

func (u *unit) reuse(ch *chunk) {
	clear(ch.hands)
	*ch = chunk{ents: ch.ents[:0], recs: ch.recs[:0], steps: ch.steps[:0], rows: ch.rows[:0],
		reqs: ch.reqs[:0], hands: ch.hands[:0], pushes: ch.pushes[:0]}
	u.free = append(u.free, ch)
}

// parallel is the side-by-side driver: goroutines step the units ahead of
// the replay, a chunk at a time, up to the barrier h (the next arrival).
// At a barrier every unit with events before it joins a round; a unit
// whose chunk the replay has written and that still has events before h
// waits in refill for the next round, and the replay steps a unit itself
// when it needs one that waits there.
type parallel struct {
	units []*unit
	h     int64
	// busy counts the units with a chunk in flight, kept the chunks
	// received and not replayed: both 0 at a barrier.
	busy, kept int
	// stopping: a stop was asked; units step only as far as the replay
	// needs to write what they kept.
	stopping bool

	refill []*unit
	// The round the goroutines step their units of, while active of them
	// still do (left: they have all left it).
	round  []*unit
	wake   []bool // the goroutines that own units of the round
	active atomic.Int32
	left   sync.WaitGroup
	start  []chan struct{}
}

// quiet reports whether nothing is in flight or kept: the replay has
// caught up with every unit.
func (p *parallel) quiet() bool { return p.busy+p.kept == 0 }

// schedule queues an event: on the cluster's queue, and on u's when the
// engines step side by side; an event a running unit schedules reaches
// the cluster's queue when the replay reaches the event that scheduled it.
func (c *Cluster) schedule(u *unit, at int64, kind uint8, idx int32) {
	if u == nil {
		c.push(at, kind, idx)
		return
	}
	u.q.Push(event{at: at, seq: u.seq, idx: idx, kind: kind})
	u.seq++
	if u.running {
		u.cur.pushes = append(u.cur.pushes, event{at: at, idx: idx, kind: kind})
		return
	}
	c.push(at, kind, idx)
}

// failIn records err: in u's entry when u is running, else on the cluster.
func (c *Cluster) failIn(u *unit, err error) {
	if u != nil && u.running {
		if u.err == nil {
			u.err = err
		}
		return
	}
	c.fail(err)
}

// unitOf is the unit that fires ev, nil for an event the replaying
// goroutine fires itself (a transfer's end, a decode engine's).
func (c *Cluster) unitOf(ev event) *unit {
	switch ev.kind {
	case evForm:
		return c.groups[ev.idx].u
	case evWake:
		return c.workers[ev.idx].u
	}
	return nil
}

// enter makes the engines step side by side on n goroutines (and this
// one, which replays): one unit per engine or expert-parallel instance,
// each queue holding its events.
func (c *Cluster) enter(n int) {
	p := &parallel{h: math.MinInt64}
	for _, g := range c.groups {
		if g.ranks[0].w.pool != c.entry {
			continue
		}
		g.u = &unit{}
		p.units = append(p.units, g.u)
		for _, r := range g.ranks {
			r.w.u = g.u
		}
	}
	for _, w := range c.workers {
		if w.u == nil && w.pool == c.entry {
			w.u = &unit{}
			p.units = append(p.units, w.u)
		}
	}
	for _, u := range p.units {
		u.filled = make(chan *chunk, 1)
	}
	var evs []event
	for c.q.Len() > 0 {
		ev, _ := c.q.Pop()
		evs = append(evs, ev)
	}
	for _, ev := range evs {
		c.q.Push(ev)
		if u := c.unitOf(ev); u != nil {
			u.q.Push(event{at: ev.at, seq: u.seq, idx: ev.idx, kind: ev.kind})
			u.seq++
		}
	}
	n = min(n, len(p.units))
	for i, u := range p.units {
		u.owner = i % n
	}
	p.wake = make([]bool, n)
	for k := range n {
		ch := make(chan struct{})
		p.start = append(p.start, ch)
		go func() {
			for range ch {
				p.work(c, k)
			}
		}()
	}
	c.par = p
}

// work steps the round's units goroutine k owns: an engine stays on one
// goroutine (its state in one core's cache).
func (p *parallel) work(c *Cluster, k int) {
	for _, u := range p.round {
		if u.owner == k {
			u.advance(c, u.task, p.h)
			u.filled <- u.task
		}
	}
	p.left.Done()
	p.active.Add(-1)
}

// exit waits for the chunks in flight and returns the cluster to one
// event at a time.
func (c *Cluster) exit() {
	p := c.par
	for _, u := range p.units {
		if u.inFlight {
			<-u.filled
		}
	}
	p.left.Wait()
	for _, ch := range p.start {
		close(ch)
	}
	for _, w := range c.workers {
		w.u = nil
	}
	for _, g := range c.groups {
		g.u = nil
	}
	c.par = nil
}

// barrier sets the horizon the units step to (the next arrival) and
// starts a round of every unit with events before it.
func (c *Cluster) barrier(h int64) {
	p := c.par
	if h == p.h {
		return
	}
	if !p.quiet() {
		c.fail(fmt.Errorf("side-by-side driver: a barrier at %d ns with units still stepping", h))
		return
	}
	p.h = h
	p.left.Wait() // the goroutines are leaving the last round
	p.refill = p.refill[:0]
	for _, u := range p.units {
		p.want(u)
	}
	p.dispatch()
}

// stepable reports whether u has events before the horizon, room to keep
// them, and no chunk in flight.
func (p *parallel) stepable(u *unit) bool {
	if u.inFlight || u.err != nil || len(u.pending) >= maxPending {
		return false
	}
	e, ok := u.q.Peek()
	return ok && e.at < p.h
}

// want queues u for the next round when it can step.
func (p *parallel) want(u *unit) {
	if !p.stopping && p.stepable(u) {
		p.refill = append(p.refill, u)
	}
}

// dispatch starts a round of the units waiting in refill, when the
// goroutines have left the last one.
func (p *parallel) dispatch() {
	if len(p.refill) == 0 || p.active.Load() != 0 {
		return
	}
	p.round, p.refill = p.refill, p.round[:0]
	k := 0
	for _, u := range p.round {
		if !p.stepable(u) { // stepped by the replay meanwhile
			continue
		}
		u.task = u.take()
		u.inFlight = true
		p.busy++
		p.round[k] = u
		k++
	}
	p.round = p.round[:k]
	clear(p.wake)
	n := 0
	for _, u := range p.round {
		if !p.wake[u.owner] {
			p.wake[u.owner] = true
			n++
		}
	}
	if n == 0 {
		return
	}
	p.active.Store(int32(n))
	p.left.Add(n)
	for i, s := range p.start {
		if p.wake[i] {
			s <- struct{}{}
		}
	}
}

// take is a free chunk.
func (u *unit) take() *chunk {
	if n := len(u.free); n > 0 {
		ch := u.free[n-1]
		u.free = u.free[:n-1]
		return ch
	}
	return &chunk{}
}

// need makes sure u has kept its next event: its chunk in flight, or
// (waiting in refill, or stopping) a chunk stepped here.
func (p *parallel) need(c *Cluster, u *unit) {
	for len(u.pending) == 0 {
		switch {
		case u.inFlight:
			p.received(u, <-u.filled)
		case p.stepable(u):
			ch := u.take()
			u.advance(c, ch, p.h)
			u.inFlight = true
			p.busy++
			p.received(u, ch)
		default:
			return
		}
	}
}

// received takes u's chunk back from flight.
func (p *parallel) received(u *unit, ch *chunk) {
	u.inFlight = false
	p.busy--
	if len(ch.ents) == 0 {
		u.reuse(ch)
		return
	}
	u.pending = append(u.pending, ch)
	p.kept++
}

// replay writes what ev's unit kept for it and schedules what it
// scheduled, as a sequential run would have when firing ev.
func (c *Cluster) replay(ev event) error {
	p, u := c.par, c.unitOf(ev)
	p.need(c, u)
	if len(u.pending) == 0 {
		c.fail(fmt.Errorf("side-by-side driver: the event at %d ns was not stepped", ev.at))
		return c.err
	}
	ch := u.pending[0]
	e := &ch.ents[ch.head]
	ch.head++
	if e.ev.at != ev.at || e.ev.kind != ev.kind || e.ev.idx != ev.idx {
		c.fail(fmt.Errorf("side-by-side driver: the event at %d ns fired out of order", ev.at))
		return c.err
	}
	// The records in order, then the pushes: an engine's run records (and
	// hands off, scheduling a transfer) before its loop is woken again.
	for _, r := range ch.recs[e.recLo:e.recHi] {
		var err error
		switch r.kind {
		case recStep:
			err = c.step(&ch.steps[r.i], ch.rows[r.lo:r.hi])
		case recRequest:
			err = c.out.Request(&ch.reqs[r.i])
		case recHandoff:
			h := ch.hands[r.i]
			err = c.startTransfer(c.workers[r.w], h.f, h.at)
		}
		if err != nil { // as the engine's run reports its sink's error
			c.fail(fmt.Errorf("%s: %w", c.workers[r.w].name, err))
			return c.err
		}
	}
	for _, x := range ch.pushes[e.pushLo:e.pushHi] {
		c.push(x.at, x.kind, x.idx)
	}
	c.fail(e.err)
	if ch.head == len(ch.ents) {
		u.recycle()
		p.kept--
		p.want(u)
		p.dispatch()
	}
	return c.err
}

// horizon is the barrier of the events before the next arrival at (none:
// no barrier).
func horizon(at int64, ready bool) int64 {
	if ready {
		return at
	}
	return math.MaxInt64
}
