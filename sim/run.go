package sim

import (
	"errors"
	"fmt"

	"github.com/steplab/steplab/sim/workload"
)

// Drive runs one engine over a workload until the workload is exhausted
// and every request has finished, and returns the final time. A source
// that is a Completer (closed loop) hears of each finished request.
//
// The engine's loop runs at its own host time; arrivals are handed to it
// before each iteration, so it sees exactly those that arrived by then.
func Drive(e *Engine, src workload.Peeker) (int64, error) {
	return DriveUntil(e, src, nil)
}

// ErrInterrupted ends a run whose stop channel closed: what ran so far is
// kept (Execute leaves a partial dataset with every recorded row).
var ErrInterrupted = errors.New("interrupted")

// DriveUntil is Drive that also ends, with ErrInterrupted, once stop is
// closed (a nil stop never closes).
func DriveUntil(e *Engine, src workload.Peeker, stop <-chan struct{}) (int64, error) {
	completer, _ := src.(workload.Completer)
	if completer != nil {
		e.onFinish = func(id string, t int64) error { return completer.Complete(id, t) }
		defer func() { e.onFinish = nil }()
	}
	next := int64(0)
	for {
		select {
		case <-stop:
			return e.Now(), ErrInterrupted
		default:
		}
		t := max(next, e.Now())
		for {
			at, st := src.NextAt()
			if st != workload.Ready || at > t {
				break
			}
			a, _ := src.Next()
			if err := e.Add(a); err != nil {
				return t, err
			}
		}
		if err := src.Err(); err != nil {
			return t, fmt.Errorf("workload: %w", err)
		}
		w, err := e.Run(t)
		if err != nil {
			return t, err
		}
		if w != NoWake {
			next = w
			continue
		}
		at, st := src.NextAt()
		switch st {
		case workload.Ready:
			next = at
		case workload.Waiting:
			if e.Busy() {
				return t, fmt.Errorf("engine idle with requests in flight at %d ns", t)
			}
			return t, fmt.Errorf("workload waits for completions but no request is running (closed loop stalled at %d ns)", t)
		default:
			if e.Busy() {
				return t, fmt.Errorf("engine idle with unfinished requests at %d ns", t)
			}
			return e.Now(), src.Err()
		}
	}
}
