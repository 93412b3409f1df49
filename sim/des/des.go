package des

import (
	"fmt"
	"math"
)

// Handler is an event's action; now is the event's time.
type Handler func(now int64)

// Event is a scheduled action.
type Event struct {
	// At is the virtual time, ns since the run's start.
	At int64
	// Seq is the insertion sequence number: the tie-break between events at
	// the same time (earlier scheduled fires first).
	Seq uint64
	// Fn is the action.
	Fn Handler
}

// Before is the queue's total order: (At, Seq).
func (e Event) Before(o *Event) bool {
	if e.At != o.At {
		return e.At < o.At
	}
	return e.Seq < o.Seq
}

// Queue is a binary min-heap of events ordered by (At, Seq). The zero value
// is an empty queue.
type Queue struct {
	h   Heap[Event]
	seq uint64
}

// Len is the number of pending events.
func (q *Queue) Len() int { return q.h.Len() }

// Push schedules fn at time at and returns the event's sequence number.
func (q *Queue) Push(at int64, fn Handler) uint64 {
	s := q.seq
	q.seq++
	q.h.Push(Event{At: at, Seq: s, Fn: fn})
	return s
}

// Peek returns the earliest event without removing it.
func (q *Queue) Peek() (Event, bool) { return q.h.Peek() }

// Pop removes and returns the earliest event.
func (q *Queue) Pop() (Event, bool) { return q.h.Pop() }

// Heap is a binary min-heap of values ordered by their Before method: the
// queue's heap, for a simulation whose events are plain values rather than
// closures (no allocation per event). The zero value is empty.
type Heap[E interface{ Before(o *E) bool }] struct{ h []E }

// Len is the number of values held.
func (q *Heap[E]) Len() int { return len(q.h) }

// Push adds e.
func (q *Heap[E]) Push(e E) {
	q.h = append(q.h, e)
	q.up(len(q.h) - 1)
}

// Peek returns the first value without removing it.
func (q *Heap[E]) Peek() (E, bool) {
	if len(q.h) == 0 {
		var zero E
		return zero, false
	}
	return q.h[0], true
}

// Pop removes and returns the first value.
func (q *Heap[E]) Pop() (E, bool) {
	var zero E
	n := len(q.h)
	if n == 0 {
		return zero, false
	}
	top := q.h[0]
	q.h[0] = q.h[n-1]
	q.h[n-1] = zero
	q.h = q.h[:n-1]
	if len(q.h) > 0 {
		q.down(0)
	}
	return top, true
}

func (q *Heap[E]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.h[i].Before(&q.h[p]) {
			return
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

func (q *Heap[E]) down(i int) {
	n := len(q.h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && q.h[r].Before(&q.h[l]) {
			m = r
		}
		if !q.h[m].Before(&q.h[i]) {
			return
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
}

// Clock is a virtual clock: it only moves forward, and only when told to.
type Clock struct{ t int64 }

// Now is the current virtual time in ns.
func (c *Clock) Now() int64 { return c.t }

// AdvanceTo moves the clock to t. Moving it backward is an error.
func (c *Clock) AdvanceTo(t int64) error {
	if t < c.t {
		return fmt.Errorf("des: clock cannot move back from %d ns to %d ns", c.t, t)
	}
	c.t = t
	return nil
}

// Sim couples a clock with an event queue.
type Sim struct {
	Clock
	q     Queue
	err   error
	fired uint64
}

// Schedule runs fn at time at (>= Now). An event scheduled in the past is
// recorded as an error, returned by Run and Step, and dropped.
func (s *Sim) Schedule(at int64, fn Handler) {
	if at < s.t {
		if s.err == nil {
			s.err = fmt.Errorf("des: event scheduled at %d ns, before now (%d ns)", at, s.t)
		}
		return
	}
	s.q.Push(at, fn)
}

// After runs fn d ns from now (d >= 0).
func (s *Sim) After(d int64, fn Handler) { s.Schedule(s.t+d, fn) }

// Pending is the number of events not yet fired.
func (s *Sim) Pending() int { return s.q.Len() }

// Fired is the number of events fired so far.
func (s *Sim) Fired() uint64 { return s.fired }

// Fail stops the simulation with err (the first error wins): Run returns it
// after the current event.
func (s *Sim) Fail(err error) {
	if s.err == nil && err != nil {
		s.err = err
	}
}

// Err is the first error met.
func (s *Sim) Err() error { return s.err }

// Step fires the earliest event. It returns false when the queue is empty or
// the simulation failed.
func (s *Sim) Step() bool {
	if s.err != nil {
		return false
	}
	ev, ok := s.q.Pop()
	if !ok {
		return false
	}
	s.t = ev.At
	s.fired++
	ev.Fn(ev.At)
	return s.err == nil
}

// Run fires events in (time, sequence) order until the queue is empty or an
// event lies after until (math.MaxInt64: no limit), and returns the first
// error met.
func (s *Sim) Run(until int64) error {
	for s.err == nil {
		ev, ok := s.q.Peek()
		if !ok || ev.At > until {
			break
		}
		s.Step()
	}
	return s.err
}

// Forever is the until of a Run with no time limit.
const Forever int64 = math.MaxInt64
