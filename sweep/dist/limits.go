package dist

import (
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/steplab/steplab/sim/cluster"
	"github.com/steplab/steplab/sweep"
)

// limitError is a point past one of its limits: terminated, not retried.
// Runaway is set when the point is still running (past its wall time or
// memory): Go cannot stop it, so the worker stops taking tasks and exits
// with an error (its supervisor restarts it).
type limitError struct {
	msg     string
	runaway bool
}

func (e *limitError) Error() string { return e.msg }

// watchEvery is the period of the wall-time and memory checks.
const watchEvery = 50 * time.Millisecond

// runBounded runs t's point within lim.
func runBounded(t *Task, lim Limits) (*sweep.Result, error) {
	if lim.MaxRequests > 0 {
		if err := checkRequests(t, lim.MaxRequests); err != nil {
			return nil, err
		}
	}
	if lim.WallTimeNs <= 0 && lim.MemoryBytes <= 0 {
		return stepBounded(t, lim.MaxSteps)
	}
	if lim.MemoryBytes > 0 {
		prev := debug.SetMemoryLimit(lim.MemoryBytes)
		defer debug.SetMemoryLimit(prev)
	}
	type outcome struct {
		res *sweep.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := stepBounded(t, lim.MaxSteps)
		done <- outcome{r, err}
	}()
	wall := time.Duration(lim.WallTimeNs)
	if wall <= 0 {
		wall = math.MaxInt64
	}
	timer := time.NewTimer(wall)
	defer timer.Stop()
	tick := time.NewTicker(watchEvery)
	defer tick.Stop()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	for {
		select {
		case o := <-done:
			return o.res, o.err
		case <-timer.C:
			return nil, &limitError{msg: fmt.Sprintf("%s: exceeded its wall-time limit of %s", t.Describe(), wall), runaway: true}
		case <-tick.C:
			if lim.MemoryBytes <= 0 {
				continue
			}
			metrics.Read(sample)
			if live := sample[0].Value.Uint64(); live > uint64(lim.MemoryBytes) {
				return nil, &limitError{msg: fmt.Sprintf("%s: exceeded its memory limit of %d MiB (%d MiB live)", t.Describe(),
					lim.MemoryBytes>>20, live>>20), runaway: true}
			}
		}
	}
}

// stepBounded runs t with its clusters bounded to max steps (0: none); a
// point that reaches the bound fails as a limit, not retried.
func stepBounded(t *Task, max int64) (*sweep.Result, error) {
	r, err := t.Execute(max)
	var sl *cluster.StepLimitError
	if errors.As(err, &sl) {
		return nil, &limitError{msg: fmt.Sprintf("%s: exceeded its step limit of %d steps", t.Describe(), sl.Max)}
	}
	return r, err
}

// checkRequests refuses a point that would simulate more than max
// requests, or whose count is not known before it runs.
func checkRequests(t *Task, max int) error {
	d, err := t.Spec.Doc()
	if err != nil {
		return err
	}
	n, err := sweep.Requests(d, t.Spec.Vary, t.Index, t.Values)
	if err != nil {
		return err
	}
	if n <= 0 && t.Kind == sweep.KindCalibrate {
		return nil // bounded by its datasets
	}
	if n <= 0 {
		return &limitError{msg: fmt.Sprintf("%s: its request count is not known before it runs, and its limit is %d requests", t.Describe(), max)}
	}
	if n > max {
		return &limitError{msg: fmt.Sprintf("%s: simulates %d requests, over its limit of %d", t.Describe(), n, max)}
	}
	return nil
}
