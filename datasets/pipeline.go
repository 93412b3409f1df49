package datasets

import (
	"errors"
	"sync"
	"sync/atomic"
)

// A pipeline encodes the completed parts of a Writer's pipelined tables on
// encoder goroutines, and lists them (and applies the Writer's commits) on
// one finisher goroutine in the order they were handed over: the order in
// which the sequential writer would have completed them. The parts queued
// for an encoder are bounded (inFlight), so a caller that outruns the
// encoders waits instead of growing memory; parts encoded and commits wait
// for the finisher in a longer queue, holding no rows.
type pipeline struct {
	w        *Writer
	inFlight int
	jobs     chan *encodeJob // to the encoders
	order    chan *encodeJob // to the finisher, in hand-over order
	done     chan struct{}   // closed when the finisher has seen every job

	mu     sync.RWMutex // submit holds it shared; drain exclusively
	closed bool
	err    atomic.Pointer[error] // the first failure; parts after it are not listed
}

// encodeJob is one part to encode, or (encode nil) a Commit.
type encodeJob struct {
	encode func() (heldPart, error)
	part   heldPart
	err    error
	ready  chan struct{} // closed once encoded
}

// MaxEncoders bounds the encoders EncodersFor gives a writer: more wait
// for rows (one encoder writes a part of 65,536 step_requests rows in a
// few milliseconds, faster than an engine records them) and each holds a
// part in memory.
const MaxEncoders = 4

// EncodersFor is the number of encoders for a writer whose caller has
// procs processors: the others, up to MaxEncoders; none on one processor,
// where the writer encodes on the caller's goroutine as it always did.
func EncodersFor(procs int) int { return max(0, min(procs-1, MaxEncoders)) }

var errPipelineClosed = errors.New("dataset writer closed")

func startPipeline(w *Writer, encoders int) *pipeline {
	// One more part than encoders is in flight at most: the one the
	// finisher waits for, and one queued behind each encoder.
	p := &pipeline{w: w, inFlight: encoders + 1, done: make(chan struct{})}
	p.order = make(chan *encodeJob, orderSlack*p.inFlight)
	p.jobs = make(chan *encodeJob, p.inFlight)
	for range encoders {
		go p.encoder()
	}
	go p.finisher()
	return p
}

func (p *pipeline) encoder() {
	for j := range p.jobs {
		if p.failed() == nil {
			j.part, j.err = j.encode()
		}
		close(j.ready)
	}
}

// finisher lists each encoded part (renamed at once or held until the
// next commit, as Writer.partDone does) and applies each commit, in the
// order they were handed over. After a failure it removes the parts
// encoded behind it.
func (p *pipeline) finisher() {
	defer close(p.done)
	for j := range p.order {
		<-j.ready
		err := j.err
		switch {
		case p.failed() != nil:
			if j.part.tmp != "" {
				removeTemp(j.part.tmp)
			}
		case err != nil:
		case j.encode == nil:
			err = p.w.commitHeld()
		default:
			err = p.w.partDone(j.part)
		}
		if err != nil {
			p.fail(err)
		}
	}
}

func (p *pipeline) failed() error {
	if err := p.err.Load(); err != nil {
		return *err
	}
	return nil
}

func (p *pipeline) fail(err error) { p.err.CompareAndSwap(nil, &err) }

// orderSlack is how many jobs a part in flight may have behind it in the
// finisher's queue: a checkpoint hands over a part of every table and a
// commit at once, and only the parts hold rows (inFlight bounds them).
const orderSlack = 4

// submit hands over a part to encode; it waits while inFlight parts are.
func (p *pipeline) submit(encode func() (heldPart, error)) error {
	return p.enqueue(&encodeJob{encode: encode, ready: make(chan struct{})})
}

// commit orders a Writer.Commit after the parts handed over before it.
func (p *pipeline) commit() error {
	j := &encodeJob{ready: make(chan struct{})}
	close(j.ready)
	return p.enqueue(j)
}

func (p *pipeline) enqueue(j *encodeJob) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return errPipelineClosed
	}
	if err := p.failed(); err != nil {
		return err
	}
	p.order <- j
	if j.encode != nil {
		p.jobs <- j
	}
	return nil
}

// drain waits until every part handed over is written and listed, stops
// the goroutines and returns the first failure. A nil pipeline (no
// encoders) has nothing to drain.
func (p *pipeline) drain() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.order)
		close(p.jobs)
	}
	p.mu.Unlock()
	<-p.done
	return p.failed()
}
