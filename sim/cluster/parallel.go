package cluster

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/sim/des"
	"github.com/steplab/steplab/sim/workload"
)

// Side by side: a conservative parallel discrete-event simulation whose
// barriers are the router's decisions.
//
// Between two arrivals the router places nothing, and the engines of the
// pool requests arrive at share no state: each engine (or expert-parallel
// instance, whose ranks step in lock-step) is a unit with its own event
// queue. At each arrival the driving goroutine brings every unit to the
// arrival's time (each steps its events strictly before it: an arrival
// fires before an event at its time) on the stepping goroutines, itself
// one of them; then it routes the arrival, reading every unit where a
// sequential run has it then, and the units go on to the next arrival,
// whose time the workload says in advance. A round costs a store and a
// load of a shared counter per goroutine while they spin between rounds.
//
// Units record nothing themselves: each keeps what it records (steps with
// their step_requests rows, request rows, the events it schedules) in a
// stream of chunks, one entry an event, and the driving goroutine keeps its
// routing decisions and the wakes they schedule in a stream of its own. A
// merging goroutine holds the cluster's event queue, in (time, order
// scheduled) order as a sequential run schedules it, and replays it: for
// each event it writes the records its unit kept for it (step ids unique
// in the cluster, in firing order) and schedules what it scheduled; at
// each arrival's place in that order it writes the arrival's route. A
// unit's events fire in its own queue in the order the cluster's queue
// would fire them (its pushes are numbered in the order they happen, which
// is the sequential order restricted to the unit), so the merger writes
// every record exactly as a sequential run does: the dataset is
// byte-identical for any goroutine count. The merger runs behind the
// units, as far as their chunks allow, so writing the records and
// stepping the engines overlap; with processors to spare it only orders,
// and a recorder goroutine writes the records in that order.
//
// A prefill engine depends on nothing downstream; the decode engines, the
// KV transfers and the decode router, which places a request when its
// prefill ends (an instant no barrier can fix in advance), fire on the
// merging goroutine, one event at a time in the cluster's order: a
// prefill unit keeps the finished prefill as a handoff the merger places
// when it reaches it.

// side is how a run may step its engines side by side: on up to jobs
// goroutines, while the windows between arrivals hold minEvents events on
// average over every arrivals (0: side by side throughout), the units
// keeping kept rows in all ahead of the merger (0: keptRows).
type side struct{ jobs, minEvents, every, kept int }

// defaultSide is a run's: every processor, and side by side only where a
// window between two arrivals holds at least minWindowEvents events.
func defaultSide() side { return side{jobs: jobs(), minEvents: minWindowEvents, every: adaptEvery} }

// minWindowEvents is the mean events between two arrivals below which
// stepping side by side loses: each arrival costs a round trip to every
// goroutine that steps engines (16 replicas on the Azure conversation
// trace have about 420 events a window, 64 replicas at 10 req/s each
// about 35). adaptEvery is the arrivals the mean is taken over before the
// driver chooses again.
const (
	minWindowEvents = 16
	adaptEvery      = 256
)

// pacer chooses, at arrivals, between one event at a time and side by
// side, from the events the entry pool's engines fired between the last
// adaptEvery arrivals (the others, a decode pool's, fire on the merging
// goroutine either way). Both write the same records, so the choice
// changes only the speed.
type pacer struct {
	side             side
	on               bool // the plan and source allow side by side
	arrivals, events int
}

// sideBySide reports whether the engines step side by side from this
// arrival on; now is whether they do so far.
func (p *pacer) sideBySide(now bool) bool {
	if !p.on {
		return false
	}
	if p.side.minEvents == 0 {
		return true
	}
	if p.arrivals++; p.arrivals < p.side.every {
		return now
	}
	want := p.events >= p.side.minEvents*p.arrivals
	p.arrivals, p.events = 0, 0
	return want
}

// A chunk keeps up to chunkRowsFor(units, keptRows) rows (a step counts
// its step_requests rows and itself, a request row one) and twice as many
// events, and a unit holds at most maxChunks ahead of the merger: memory
// stays flat however long the run, and about the same however many
// engines step side by side.
const (
	keptRows  = 1 << 14
	maxChunks = 3
)

// chunkRowsFor is the rows a chunk of one of n units keeps, of kept rows
// in all: between 1/128 and 1/16 of them.
func chunkRowsFor(n, kept int) int { return max(kept/128, min(kept/16, kept/max(1, n))) }

// jobs is how many goroutines a cluster run steps its engines on: the Go
// scheduler's processors, until the command's job count is resolved in
// one place.
func jobs() int { return runtime.GOMAXPROCS(0) }

// SequentialReason says why the plan's engines cannot step side by side
// between routing decisions, or "" when they can (more than one unit, an
// aggregated pool, an open-loop workload).
func (p *Plan) SequentialReason() string {
	// The entry pool's units, and the decode engines the merger steps.
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
// expert-parallel instance; or the driving goroutine's arrivals, which
// keep their routes and wakes in a stream like a unit's. Its queue,
// engines and err belong to the goroutine stepping it during a round, and
// to the driving goroutine between rounds; cur is its stepper's, head the
// merger's.
type unit struct {
	q       des.Heap[event]
	seq     uint64
	workers []*worker // its engines
	// running: the unit is stepping, keeping its records in cur; wanted:
	// the merger waits for its next entry.
	running bool
	wanted  atomic.Bool
	err     error
	// stepper and slot: where its stepper keeps its next event time.
	stepper *stepper
	slot    int
	// The stream of what it keeps: cur is the chunk it fills, head the
	// one the merger replays (cur or an older one); replayed chunks come
	// back through free. made counts the chunks it has, each of rows.
	cur, head *chunk
	free      chan *chunk
	made      int
	rows      int
}

// chunk is what a unit kept for a run of its events: ents[:pub] are
// published to the merger, and once sealed the unit keeps no more here
// (next is its next chunk). Records are kept by address (rec), so the
// slices that hold them may grow while the merger reads what they held.
type chunk struct {
	ents   []entry
	n      int // entries kept (the unit's)
	pub    atomic.Int32
	sealed atomic.Bool
	next   atomic.Pointer[chunk]
	read   int // entries replayed (the merger's)
	seen   int // entries the merger has seen published

	rows    int // rows kept
	recLo   int // the open entry's first record
	recs    []rec
	steps   []datasets.Step
	reqRows []datasets.StepRequest
	reqs    []datasets.Request
	routes  []Route
	scores  []float64
}

// entry is one event a unit fired, or an arrival the driving goroutine
// placed: what it recorded and scheduled, in the order it did, and its
// error.
type entry struct {
	ev   event
	recs []rec
	err  error
}

// rec is one kept record of engine w: a step and its rows, a request
// row, a prefilled request for the decode router (f at at), a route, or
// an event scheduled at at (of kind ev, for w).
type rec struct {
	kind, ev uint8
	w        int32
	at       int64
	step     *datasets.Step
	rows     []datasets.StepRequest
	req      *datasets.Request
	route    *Route
	f        *flight
}

// Kept record kinds.
const (
	recStep uint8 = iota
	recRequest
	recHandoff
	recRoute
	recPush
)

// newUnit is a unit whose chunks keep rows rows.
func newUnit(rows int) *unit {
	ch := newChunk(rows)
	return &unit{cur: ch, head: ch, made: 1, free: make(chan *chunk, maxChunks), rows: rows}
}

func newChunk(rows int) *chunk { return &chunk{ents: make([]entry, 2*rows)} }

// reset empties a chunk the merger has replayed for the unit to fill
// again (what it held is overwritten, not cleared: a chunk is large).
func (ch *chunk) reset() {
	ch.n, ch.read, ch.seen, ch.rows, ch.recLo = 0, 0, 0, 0, 0
	ch.pub.Store(0)
	ch.sealed.Store(false)
	ch.next.Store(nil)
	ch.recs, ch.steps, ch.reqRows, ch.reqs = ch.recs[:0], ch.steps[:0], ch.reqRows[:0], ch.reqs[:0]
	ch.routes, ch.scores = ch.routes[:0], ch.scores[:0]
}

// begin opens the entry of event ev, in a new chunk when the current one
// is full. It returns false when it has no chunk to keep it in: none is
// free (and wait is false: its stepper steps its other units meanwhile),
// or the merger has failed (nothing more is replayed).
func (u *unit) begin(p *parallel, ev event, wait bool) bool {
	if ch := u.cur; ch.n == len(ch.ents) || ch.rows >= u.rows {
		var nx *chunk
		select {
		case nx = <-u.free:
		default:
			switch {
			case u.made < maxChunks:
				nx = newChunk(u.rows)
				u.made++
			case !wait:
				return false
			default:
				select {
				case nx = <-u.free:
				case <-p.abort:
					return false
				}
			}
		}
		nx.reset()
		u.publish(p)
		ch.next.Store(nx)
		ch.sealed.Store(true)
		if u.wanted.Load() {
			p.merge.notify()
		}
		u.cur = nx
	}
	ch := u.cur
	ch.ents[ch.n].ev = ev
	ch.recLo = len(ch.recs)
	return true
}

// end closes the open entry, with err; it is published with the next few
// (publishEvery), or at once when the merger waits for it.
func (u *unit) end(p *parallel, err error) {
	ch := u.cur
	e := &ch.ents[ch.n]
	e.recs = ch.recs[ch.recLo:len(ch.recs):len(ch.recs)]
	e.err = err
	if ch.n++; ch.n%publishEvery == 0 || u.wanted.Load() {
		u.publish(p)
	}
}

// publishEvery is how many entries a unit keeps before it publishes them
// (and when it stops stepping): an atomic store a few events, not each.
const publishEvery = 16

// publish hands the merger the entries kept so far.
func (u *unit) publish(p *parallel) {
	ch := u.cur
	if int(ch.pub.Load()) == ch.n {
		return
	}
	ch.pub.Store(int32(ch.n))
	if u.wanted.Load() {
		p.merge.notify()
	}
}

// nextStep lends the engine the row its next step is kept in.
func (ch *chunk) nextStep() *datasets.Step {
	ch.steps = room(ch.steps, 1)
	return &ch.steps[:len(ch.steps)+1][len(ch.steps)]
}

// nextRows lends the engine the n step_requests rows its next step is
// kept with.
func (ch *chunk) nextRows(n int) []datasets.StepRequest {
	ch.reqRows = room(ch.reqRows, n)
	l := len(ch.reqRows)
	return ch.reqRows[l : l+n : l+n]
}

// room is s with room for n more elements: s, or a new empty slice when
// s is full. It never copies s: the merger may be numbering the steps
// and rows kept there.
func room[T any](s []T, n int) []T {
	if len(s)+n <= cap(s) {
		return s
	}
	return make([]T, 0, max(2*cap(s), n, 64))
}

// keepStep keeps engine w's step: in place when it is in the rows the
// chunk lent, else copied there.
func (u *unit) keepStep(w *worker, st *datasets.Step, rows []datasets.StepRequest) {
	ch := u.cur
	if l := len(ch.steps); l < cap(ch.steps) && st == &ch.steps[:l+1][l] {
		ch.steps = ch.steps[:l+1]
	} else {
		ch.steps = append(room(ch.steps, 1), *st)
	}
	if l := len(ch.reqRows); len(rows) > 0 && l+len(rows) <= cap(ch.reqRows) && &rows[0] == &ch.reqRows[:l+1][l] {
		ch.reqRows = ch.reqRows[:l+len(rows)]
	} else {
		ch.reqRows = append(room(ch.reqRows, len(rows)), rows...)
	}
	l := len(ch.reqRows)
	ch.recs = append(ch.recs, rec{kind: recStep, w: w.idx, step: &ch.steps[len(ch.steps)-1], rows: ch.reqRows[l-len(rows) : l : l]})
	ch.rows += 1 + len(rows)
}

func (u *unit) keepRequest(w *worker, r *datasets.Request) {
	ch := u.cur
	k := *r
	k.PrefixHashIDs = slices.Clone(r.PrefixHashIDs)
	ch.reqs = append(ch.reqs, k)
	ch.recs = append(ch.recs, rec{kind: recRequest, w: w.idx, req: &ch.reqs[len(ch.reqs)-1]})
	ch.rows++
}

func (u *unit) keepHandoff(w *worker, f *flight, at int64) {
	ch := u.cur
	ch.recs = append(ch.recs, rec{kind: recHandoff, w: w.idx, f: f, at: at})
	ch.rows++
}

// keepRoute keeps a routing decision of the driving goroutine.
func (u *unit) keepRoute(r *Route) {
	ch := u.cur
	k := *r
	l := len(ch.scores)
	ch.scores = append(ch.scores, r.Scores...)
	k.Scores = ch.scores[l:len(ch.scores):len(ch.scores)]
	ch.routes = append(ch.routes, k)
	ch.recs = append(ch.recs, rec{kind: recRoute, route: &ch.routes[len(ch.routes)-1]})
	ch.rows++
}

// keepPush keeps an event the entry scheduled, for the merger to schedule
// on the cluster's queue.
func (u *unit) keepPush(at int64, kind uint8, idx int32) {
	ch := u.cur
	ch.recs = append(ch.recs, rec{kind: recPush, ev: kind, w: idx, at: at})
}

// advance fires the unit's events before h, keeping what they record,
// until it has no chunk to keep them in (more: it has events before h
// left), and returns how many it fired.
func (u *unit) advance(c *Cluster, p *parallel, h int64) (n int, more bool) {
	u.running = true
	for u.err == nil {
		ev, ok := u.q.Peek()
		if !ok || ev.at >= h {
			break
		}
		if !u.begin(p, ev, false) {
			more = !p.failed.Load()
			break
		}
		u.q.Pop()
		c.fire(ev)
		u.end(p, u.err)
		n++
	}
	u.publish(p)
	u.running = false
	return n, more
}

// nextAt is the time of the unit's next event (math.MaxInt64: none).
func (u *unit) nextAt() int64 {
	if ev, ok := u.q.Peek(); ok {
		return ev.at
	}
	return math.MaxInt64
}

// stepper is a goroutine that steps units, the same ones throughout: an
// engine's state stays in one core's cache. next[i] is when units[i] has
// its next event, first the earliest: a round wakes only the steppers with
// events before its horizon (with the kv router, every one: they ask
// their engines' overlaps).
type stepper struct {
	units  []*unit
	next   []int64
	first  int64
	todo   []int // the units a round still steps
	events int   // fired in its last round
	failed bool  // a unit of it failed
	round  atomic.Uint64
	park   parker
	_      [64]byte // the driving goroutine reads every stepper's fields: each its own lines
}

// parallel is the side-by-side driver's state.
type parallel struct {
	units []*unit
	arr   *unit // the arrivals the driving goroutine placed
	// The units of each worker's wakes and each group's waves, read by
	// the merger (the workers' own fields share lines their engines
	// write).
	wakes, forms []*unit
	// steppers[0] is the driving goroutine's.
	steppers []*stepper
	overlaps bool // the kv router reads every engine's overlap: its steppers ask them

	// A round: the driving goroutine sets h (and hashes, the prompt of
	// the arrival at h) and starts round gen of the steppers it needs;
	// each steps its units to h and counts left down.
	h      atomic.Int64
	hashes []uint64
	gen    uint64
	left   atomic.Int32
	quit   atomic.Bool
	drive  parker // the driving goroutine's, waiting for a round's end
	joined sync.WaitGroup

	// The merger: it replays up to h; closed says no arrival follows
	// those the driving goroutine kept.
	merge    parker
	closed   atomic.Bool
	failed   atomic.Bool
	failOnce sync.Once
	abort    chan struct{} // closed when the merger fails
	merged   chan struct{} // closed when the merger (and its recorder) returns
	last     int64         // the last event it fired
	rec      *recorder     // the merger's recording half, nil: it records itself
}

// errStopped ends a side-by-side run whose merger has stopped or will stop
// at a failure; the cluster's error is the run's.
var errStopped = errors.New("side-by-side driver: stopped at a failure")

// entryEvent reports whether ev is the loop of an entry pool's engine or
// a wave of its expert-parallel instance: a unit's event side by side.
func (c *Cluster) entryEvent(ev event) bool {
	switch ev.kind {
	case evForm:
		return c.groups[ev.idx].ranks[0].w.pool == c.entry
	case evWake:
		return c.workers[ev.idx].pool == c.entry
	}
	return false
}

// unitOf is the unit that fires ev, nil for an event the merger fires
// itself (a transfer's end, a decode engine's).
func (c *Cluster) unitOf(ev event) *unit {
	switch ev.kind {
	case evForm:
		return c.groups[ev.idx].u
	case evWake:
		return c.workers[ev.idx].u
	}
	return nil
}

// unitOf is c.unitOf, for the merger.
func (p *parallel) unitOf(ev event) *unit {
	switch ev.kind {
	case evForm:
		return p.forms[ev.idx]
	case evWake:
		return p.wakes[ev.idx]
	}
	return nil
}

// schedule queues an event: on the cluster's queue, and on u's when the
// engines step side by side, where the cluster's queue gets it when the
// merger replays the entry that scheduled it (a unit's event, or an
// arrival the driving goroutine placed).
func (c *Cluster) schedule(u *unit, at int64, kind uint8, idx int32) {
	if u == nil {
		c.push(at, kind, idx)
		return
	}
	u.q.Push(event{at: at, seq: u.seq, idx: idx, kind: kind})
	u.seq++
	switch {
	case u.running:
		u.keepPush(at, kind, idx)
	case c.par != nil:
		c.par.arr.keepPush(at, kind, idx)
		s := u.stepper
		s.next[u.slot] = min(s.next[u.slot], at)
		s.first = min(s.first, at)
	default:
		c.push(at, kind, idx)
	}
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

// enter makes the engines step side by side on n goroutines (this one,
// which drives, included) and a merging one: one unit per engine or
// expert-parallel instance of the entry pool, each queue holding its
// events.
func (c *Cluster) enter(n, kept int) {
	p := &parallel{abort: make(chan struct{}), merged: make(chan struct{}), overlaps: c.plan.Router.Name == RouterKV}
	p.h.Store(math.MinInt64)
	var groups []*group
	var solos []*worker
	for _, g := range c.groups {
		if g.ranks[0].w.pool == c.entry {
			groups = append(groups, g)
		}
	}
	for _, w := range c.workers {
		if w.group == nil && w.pool == c.entry {
			solos = append(solos, w)
		}
	}
	if kept == 0 {
		kept = keptRows
	}
	rows := chunkRowsFor(len(groups)+len(solos), kept)
	for _, g := range groups {
		g.u = newUnit(rows)
		for _, r := range g.ranks {
			r.w.u = g.u
			g.u.workers = append(g.u.workers, r.w)
		}
		p.units = append(p.units, g.u)
	}
	for _, w := range solos {
		w.u = newUnit(rows)
		w.u.workers = []*worker{w}
		p.units = append(p.units, w.u)
	}
	p.arr = newUnit(rows)
	p.wakes, p.forms = make([]*unit, len(c.workers)), make([]*unit, len(c.groups))
	for i, w := range c.workers {
		p.wakes[i] = w.u
	}
	for i, g := range c.groups {
		p.forms[i] = g.u
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
	// The merger takes a processor; with more than two, it hands its
	// records to a recorder on another (unless it fires decode engines,
	// whose records are its own), and the units step on the rest, on two
	// at least (on two processors, one stepper alone would leave the
	// merger's idle half the time).
	merging := 1
	if n > 2 && c.decode == nil {
		p.rec = newRecorder()
		merging = 2
	}
	n = min(len(p.units), max(2, n-merging))
	p.steppers = make([]*stepper, n)
	for k := range p.steppers {
		p.steppers[k] = &stepper{park: newParker()}
	}
	for i, u := range p.units {
		st := p.steppers[i%n]
		u.stepper, u.slot = st, len(st.units)
		st.units = append(st.units, u)
		st.next = append(st.next, u.nextAt())
	}
	for _, st := range p.steppers {
		st.first = slices.Min(st.next)
	}
	p.drive, p.merge = newParker(), newParker()
	c.par = p
	for _, st := range p.steppers[1:] {
		p.joined.Add(1)
		go p.stepper(c, st)
	}
	go p.merger(c)
	if p.rec != nil {
		go p.record(c)
	}
}

// leave waits for the merger to replay everything before the horizon and
// returns the cluster to one event at a time, its queue as a sequential
// run has it there; it returns the last event time the merger fired.
func (c *Cluster) leave() int64 {
	p := c.par
	p.closed.Store(true)
	p.merge.notify()
	<-p.merged
	p.quit.Store(true)
	p.gen++
	for _, st := range p.steppers[1:] {
		st.round.Store(p.gen)
		st.park.notify()
	}
	p.joined.Wait()
	for _, w := range c.workers {
		w.u = nil
	}
	for _, g := range c.groups {
		g.u = nil
	}
	c.par = nil
	return p.last
}

// stepper runs a stepper's rounds.
func (p *parallel) stepper(c *Cluster, st *stepper) {
	defer p.joined.Done()
	var seen uint64
	for {
		st.park.wait(func() bool { return st.round.Load() != seen })
		seen = st.round.Load()
		if p.quit.Load() {
			return
		}
		p.step(c, st)
		if p.left.Add(-1) == 0 {
			p.drive.notify()
		}
	}
}

// step brings the stepper's units with events before the horizon to it
// and, for the kv router, asks each of their engines the overlap of the
// arriving prompt (the router reads them next: asked here, on the
// goroutines that hold the engines' caches, rather than one after
// another).
func (p *parallel) step(c *Cluster, st *stepper) {
	h := p.h.Load()
	st.events = 0
	// A unit out of chunks waits for the merger, which may need another
	// unit's events first: the stepper steps the others meanwhile, and
	// sleeps only when none can go on.
	todo := st.todo[:0]
	for i := range st.units {
		if st.next[i] < h {
			todo = append(todo, i)
		}
	}
	for len(todo) > 0 {
		stepped, left := false, todo[:0]
		for _, i := range todo {
			u := st.units[i]
			n, more := u.advance(c, p, h)
			st.events += n
			stepped = stepped || n > 0
			if more {
				left = append(left, i)
				continue
			}
			st.next[i] = u.nextAt()
			st.failed = st.failed || u.err != nil
		}
		todo = left
		if !stepped && len(todo) > 0 {
			st.park.wait(func() bool {
				for _, i := range todo {
					if len(st.units[i].free) > 0 {
						return true
					}
				}
				return p.failed.Load()
			})
		}
	}
	st.todo = todo
	for _, u := range st.units {
		if p.overlaps && len(p.hashes) > 0 && u.err == nil {
			for _, w := range u.workers {
				w.overlap(p.hashes)
			}
		}
	}
	st.first = slices.Min(st.next)
}

// arrive steps every unit to the arrival's time and places it. It
// returns errStopped when the run stops there: a unit failed, the merger
// did, or placing the arrival did (the merger replays it to that point).
// events counts the events the units fired.
func (p *parallel) arrive(c *Cluster, a workload.Arrival) (events int, err error) {
	if events = p.round(c, a.AtNs, a.PrefixHashes); events < 0 || p.failed.Load() || !p.arr.begin(p, event{at: a.AtNs}, true) {
		return max(events, 0), errStopped
	}
	aerr := c.add(a)
	p.arr.end(p, aerr)
	p.arr.publish(p)
	p.merge.notify()
	if aerr != nil {
		return events, errStopped
	}
	return events, nil
}

// round steps every unit to h (hashes: the prompt arriving at h) on the
// steppers that have events before it (all of them for the kv router),
// this goroutine's included, and waits for them. It returns the events
// they fired, or -1 when a unit failed.
func (p *parallel) round(c *Cluster, h int64, hashes []uint64) int {
	p.h.Store(h)
	p.hashes = hashes
	p.merge.notify() // it may replay up to h
	all := p.overlaps && len(hashes) > 0
	p.gen++
	n := int32(0)
	for _, st := range p.steppers {
		if st.events = 0; all || st.first < h {
			n++
		}
	}
	p.left.Store(n)
	for _, st := range p.steppers[1:] {
		if all || st.first < h {
			st.round.Store(p.gen)
			st.park.notify()
		}
	}
	if st := p.steppers[0]; all || st.first < h {
		p.step(c, st)
		n--
		p.left.Add(-1)
	}
	if n > 0 {
		p.drive.wait(func() bool { return p.left.Load() == 0 })
	}
	events := 0
	for _, st := range p.steppers {
		if events += st.events; st.failed {
			return -1
		}
	}
	return events
}

// merger replays the cluster's queue up to the horizon (see above) until
// the driving goroutine has closed the arrivals and everything before the
// horizon is replayed, or a record fails. With a recorder (p.rec), it
// only orders: it schedules what each entry scheduled and hands the
// entry to the recorder, which writes its records in the same order.
func (p *parallel) merger(c *Cluster) {
	if p.rec != nil {
		defer p.rec.close()
	} else {
		defer close(p.merged)
	}
	for !p.failed.Load() {
		a := p.peek(p.arr)
		top, ok := c.q.Peek()
		switch {
		case a != nil && (!ok || a.ev.at <= top.at):
			p.arr.head.read++
			p.replay(c, a)
		case ok && top.at < p.h.Load():
			c.q.Pop()
			p.last = top.at
			if u := p.unitOf(top); u != nil {
				e := p.next(u)
				if e.ev.at != top.at || e.ev.kind != top.kind || e.ev.idx != top.idx {
					p.fail(c, fmt.Errorf("side-by-side driver: the event at %d ns fired out of order", top.at))
					return
				}
				p.replay(c, e)
			} else {
				c.fire(top)
			}
		case p.closed.Load():
			if p.peek(p.arr) == nil {
				return
			}
		default:
			p.merge.wait(func() bool {
				return p.peek(p.arr) != nil || p.closed.Load() || ok && top.at < p.h.Load() || p.failed.Load()
			})
		}
		if p.rec == nil && c.err != nil {
			p.fail(c, nil)
		}
	}
}

// replay is c.replay of e, or (with a recorder) its pushes, the entry
// going to the recorder for its records.
func (p *parallel) replay(c *Cluster, e *entry) {
	if p.rec == nil {
		c.replay(e, true, true)
		return
	}
	c.replay(e, true, false)
	p.rec.put(recItem{e: e})
}

// fail stops the run at err: the merger's (one stage) or the recorder's
// error, or the merger's own handed to the recorder in order.
func (p *parallel) fail(c *Cluster, err error) {
	if p.rec != nil && err != nil {
		p.rec.put(recItem{err: err})
		return
	}
	c.fail(err)
	p.stop()
}

// stop ends the run at a failure: the units stop stepping (those waiting
// for a chunk wake), the merger stops ordering.
func (p *parallel) stop() {
	p.failOnce.Do(func() {
		p.failed.Store(true)
		close(p.abort)
		for _, st := range p.steppers {
			st.park.notify()
		}
		p.merge.notify()
	})
}

// peek is u's next published entry, nil when it has published no more
// yet. Replayed chunks go back to the unit.
func (p *parallel) peek(u *unit) *entry {
	for {
		ch := u.head
		if ch.read < ch.seen {
			return &ch.ents[ch.read]
		}
		// Published entries are read in runs: the count the unit keeps
		// writing is loaded once a run.
		if ch.seen = int(ch.pub.Load()); ch.read < ch.seen {
			return &ch.ents[ch.read]
		}
		if !ch.sealed.Load() {
			return nil
		}
		if ch.seen = int(ch.pub.Load()); ch.read < ch.seen {
			return &ch.ents[ch.read]
		}
		u.head = ch.next.Load()
		if p.rec != nil {
			p.rec.put(recItem{done: ch, u: u}) // recorded after its entries
		} else {
			u.recycle(ch)
		}
	}
}

// recycle gives the unit back a chunk whose entries are all recorded.
func (u *unit) recycle(ch *chunk) {
	u.free <- ch
	if u.stepper != nil {
		u.stepper.park.notify() // it may wait for this chunk
	}
}

// next takes u's entry for its next event, waiting for u to publish it.
func (p *parallel) next(u *unit) *entry {
	for {
		if e := p.peek(u); e != nil {
			u.head.read++
			return e
		}
		u.wanted.Store(true)
		p.merge.wait(func() bool {
			ch := u.head
			return ch.read < int(ch.pub.Load()) || ch.sealed.Load()
		})
		u.wanted.Store(false)
	}
}

// replay writes the records of an entry (record) and schedules what it
// scheduled (push), as a sequential run does when it fires the entry's
// event (or places its arrival).
func (c *Cluster) replay(e *entry, push, record bool) {
	// In the order the event made them: an engine's run records (and
	// hands off, scheduling a transfer) before its loop is woken again.
	for i := range e.recs {
		r := &e.recs[i]
		if r.kind == recPush {
			if push {
				c.push(r.at, r.ev, r.w)
			}
			continue
		}
		if !record {
			continue
		}
		var err error
		switch r.kind {
		case recStep:
			err = c.keptStep(r.step, r.rows)
		case recRequest:
			err = c.out.Request(r.req)
		case recHandoff:
			err = c.startTransfer(c.workers[r.w], r.f, r.at)
		case recRoute:
			c.fail(c.out.Route(r.route))
			continue
		}
		if err != nil { // as the engine's run reports its sink's error
			c.fail(fmt.Errorf("%s: %w", c.workers[r.w].name, err))
			return
		}
	}
	if record {
		c.fail(e.err)
	}
}

// recorder writes the records of the entries the merger hands it, in
// that order, on a goroutine of its own (the merger's other half): where
// processors are to spare and every record is a unit's (no decode pool,
// whose engines the merger fires itself).
type recorder struct {
	items        []recItem // a ring: items [head, tail) are queued
	head, tail   atomic.Uint64
	closed       atomic.Bool
	space, ready parker // the merger waits for space, the recorder for items
}

// recItem is an entry to record, a chunk done (every entry of it handed
// over before: it goes back to unit u once they are recorded), or the
// merger's error.
type recItem struct {
	e    *entry
	done *chunk
	u    *unit
	err  error
}

// recorderItems bounds what the merger orders ahead of the recorder.
const recorderItems = 1 << 14

func newRecorder() *recorder {
	return &recorder{items: make([]recItem, recorderItems), space: newParker(), ready: newParker()}
}

// put queues it, waiting for room.
func (r *recorder) put(it recItem) {
	t := r.tail.Load()
	if t-r.head.Load() == uint64(len(r.items)) {
		r.space.wait(func() bool { return t-r.head.Load() < uint64(len(r.items)) })
	}
	r.items[t%uint64(len(r.items))] = it
	r.tail.Store(t + 1)
	r.ready.notify()
}

// close says the merger queues no more.
func (r *recorder) close() {
	r.closed.Store(true)
	r.ready.notify()
}

// record runs the recorder: it writes what the merger orders until the
// merger has closed the queue and it is empty. After a failure it only
// drains the queue, so that the merger, which stops at the failure, never
// waits for room.
func (p *parallel) record(c *Cluster) {
	defer close(p.merged)
	r := p.rec
	for h := r.head.Load(); ; h++ {
		if h == r.tail.Load() {
			r.ready.wait(func() bool { return h < r.tail.Load() || r.closed.Load() })
			if h == r.tail.Load() {
				return
			}
		}
		it := r.items[h%uint64(len(r.items))]
		r.items[h%uint64(len(r.items))] = recItem{}
		switch {
		case p.failed.Load():
		case it.done != nil:
			it.u.recycle(it.done)
		case it.e != nil:
			c.replay(it.e, false, true)
		default:
			c.fail(it.err)
		}
		r.head.Store(h + 1)
		r.space.notify()
		if c.err != nil {
			p.stop()
		}
	}
}

// keptStep records a step a unit kept, copied once into the rows the
// cluster's sink lends (its dataset writer's), else numbered in place.
func (c *Cluster) keptStep(st *datasets.Step, rows []datasets.StepRequest) error {
	if l := c.lender; l != nil {
		if d := l.NextStep(); d != nil {
			*d = *st
			st = d
		}
		if d := l.NextRows(len(rows)); d != nil {
			copy(d, rows)
			rows = d
		}
	}
	return c.step(st, rows)
}

// spinWait is how many times a goroutine looks for what it waits for
// before it sleeps: the other side is usually a few microseconds away.
const spinWait = 1 << 12

// parker lets a goroutine wait for a condition another one makes true:
// it spins a while, then sleeps until notified.
type parker struct {
	asleep atomic.Bool
	wake   chan struct{}
}

func newParker() parker { return parker{wake: make(chan struct{}, 1)} }

// wait returns once ready does.
func (k *parker) wait(ready func() bool) {
	for i := range spinWait {
		if ready() {
			return
		}
		if i%64 == 63 {
			runtime.Gosched()
		}
	}
	for {
		k.asleep.Store(true)
		if ready() {
			if !k.asleep.CompareAndSwap(true, false) {
				<-k.wake // a notify took it: take its token
			}
			return
		}
		<-k.wake
		if ready() {
			return
		}
	}
}

// notify wakes the goroutine if it sleeps in wait (the caller has made
// its condition true).
func (k *parker) notify() {
	if k.asleep.Load() && k.asleep.CompareAndSwap(true, false) {
		k.wake <- struct{}{}
	}
}
