package distsweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/steplab/steplab/replay/sweep"
)

// SubmitOptions tune Submit.
type SubmitOptions struct {
	// SweepID names the sweep (default: Spec.ID()).
	SweepID string
	// Results is the directory the workers write parts to; the submitter
	// reads them from it.
	Results string
	// Queue is the consumer's redelivery policy.
	Queue QueueConfig
	// Timeout bounds the wait for the points (0: until ctx ends).
	Timeout time.Duration
	// Poll is the period of the results directory scan (default 200 ms).
	Poll time.Duration
	// Resume keeps the parts of an earlier submission of the same sweep
	// and submits only the missing points; otherwise they are removed
	// first.
	Resume bool
	// Events, when set, hears the sweep's progress (from one goroutine).
	Events func(Event)

	// mutate, a test hook, edits each task before it is published.
	mutate func(*Task)
}

// Event is a progress event of a distributed sweep (the --json lines).
type Event struct {
	Event   string `json:"event"` // submitted | done | dead | timeout | complete
	SweepID string `json:"sweep_id"`
	TaskID  string `json:"task_id,omitempty"`
	Index   *int   `json:"index,omitempty"`
	Error   string `json:"error,omitempty"`
	// Attempts of a dead task.
	Attempts int `json:"attempts,omitempty"`
	Done     int `json:"done"`
	Dead     int `json:"dead"`
	Total    int `json:"total"`
	// ElapsedS since the submission.
	ElapsedS float64 `json:"elapsed_s"`
}

// Outcome is what a submission ended with.
type Outcome struct {
	SweepID string
	Run     string
	Total   int
	// Done has a part per point; Dead failed every delivery; Pending had
	// neither when the timeout came.
	Done    []int
	Dead    []DeadLetter
	Pending []int
	Elapsed time.Duration
}

// maxDeliveriesAdvisory is the server's JSConsumerDeliveryExceededAdvisory.
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// Submit publishes every point of spec as a task and follows the sweep
// until each point has a part in opts.Results or a dead letter, or the
// timeout passes. It does not merge (see Merge). An error means the sweep
// could not be submitted or followed; a timeout is reported in the
// Outcome's Pending, with an error.
func Submit(ctx context.Context, js jetstream.JetStream, spec Spec, opts SubmitOptions) (*Outcome, error) {
	start := time.Now()
	if opts.Results == "" {
		return nil, fmt.Errorf("sweep: no results directory for the workers' parts")
	}
	if opts.SweepID == "" {
		opts.SweepID = spec.ID()
	}
	if opts.Poll <= 0 {
		opts.Poll = 200 * time.Millisecond
	}
	opts.Queue = opts.Queue.withDefaults()
	run := newRun()
	tasks, err := Plan(spec, opts.SweepID, run)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Results, 0o755); err != nil {
		return nil, err
	}
	id := opts.SweepID
	out := &Outcome{SweepID: id, Run: run, Total: len(tasks)}
	emit := func(e Event) {
		e.SweepID, e.Total, e.Done, e.Dead = id, len(tasks), len(out.Done), len(out.Dead)
		e.ElapsedS = time.Since(start).Seconds()
		if opts.Events != nil {
			opts.Events(e)
		}
	}

	st, kv, err := Ensure(ctx, js, opts.Queue)
	if err != nil {
		return nil, err
	}
	// Leftovers of an earlier submission of this sweep id.
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(Subject(id))); err != nil {
		return nil, fmt.Errorf("purging %s: %w", Subject(id), err)
	}
	existing, err := PartsIn(opts.Results)
	if err != nil {
		return nil, err
	}
	pending := map[int]bool{}
	for _, t := range tasks {
		if p, ok := existing[id][t.Index]; ok {
			if opts.Resume {
				if _, err := ReadPart(p); err == nil {
					out.Done = append(out.Done, t.Index)
					continue
				}
			}
			if err := os.Remove(p); err != nil {
				return nil, err
			}
		}
		pending[t.Index] = true
	}

	// Watch before publishing, so that nothing is missed.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watcher, err := kv.Watch(wctx, id+".*", jetstream.UpdatesOnly())
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", DeadBucket, err)
	}
	defer watcher.Stop()
	nc := js.Conn()
	advisories := make(chan *nats.Msg, 256)
	sub, err := nc.ChanSubscribe(fmt.Sprintf("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.%s.%s", StreamName, ConsumerName), advisories)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()

	for i := range tasks {
		t := &tasks[i]
		if !pending[t.Index] {
			continue
		}
		t.AckWaitNs, t.MaxDeliver = int64(opts.Queue.AckWait), opts.Queue.MaxDeliver
		if opts.mutate != nil {
			opts.mutate(t)
		}
		b, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		if _, err := js.Publish(ctx, Subject(id), b, jetstream.WithMsgID(t.ID()+"."+run)); err != nil {
			return nil, fmt.Errorf("publishing %s: %w", t.ID(), err)
		}
	}
	emit(Event{Event: "submitted"})
	for _, i := range out.Done {
		emit(Event{Event: "done", TaskID: TaskID(id, i), Index: &i})
	}

	var deadline <-chan time.Time
	if opts.Timeout > 0 {
		tm := time.NewTimer(opts.Timeout)
		defer tm.Stop()
		deadline = tm.C
	}
	tick := time.NewTicker(opts.Poll)
	defer tick.Stop()
	scan := func() error {
		parts, err := PartsIn(opts.Results)
		if err != nil {
			return err
		}
		var idx []int
		for i := range parts[id] {
			if pending[i] {
				idx = append(idx, i)
			}
		}
		slices.Sort(idx)
		for _, i := range idx {
			delete(pending, i)
			out.Done = append(out.Done, i)
			emit(Event{Event: "done", TaskID: TaskID(id, i), Index: &i})
		}
		return nil
	}
	dead := func(d DeadLetter) {
		if d.SweepID != id || d.Run != run || !pending[d.Index] {
			return
		}
		// A part written by an earlier attempt wins over the dead letter.
		if _, err := os.Stat(filepath.Join(opts.Results, PartName(id, d.Index))); err == nil {
			return
		}
		delete(pending, d.Index)
		out.Dead = append(out.Dead, d)
		i := d.Index
		emit(Event{Event: "dead", TaskID: d.TaskID, Index: &i, Error: d.Error, Attempts: d.Attempts})
	}
	for len(pending) > 0 {
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-deadline:
			_ = scan()
			for i := range pending {
				out.Pending = append(out.Pending, i)
			}
			slices.Sort(out.Pending)
			pctx, pc := context.WithTimeout(context.Background(), 5*time.Second)
			_ = st.Purge(pctx, jetstream.WithPurgeSubject(Subject(id)))
			pc()
			out.Elapsed = time.Since(start)
			emit(Event{Event: "timeout", Error: fmt.Sprintf("%d points neither done nor dead-lettered", len(out.Pending))})
			return out, fmt.Errorf("sweep %s: timed out after %s with %d of %d points pending (see `steplab worker`; resubmit with --resume to keep the %d done)",
				id, opts.Timeout, len(out.Pending), len(tasks), len(out.Done))
		case e, ok := <-watcher.Updates():
			if !ok {
				return out, fmt.Errorf("dead-letter watch stopped")
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var d DeadLetter
			if json.Unmarshal(e.Value(), &d) == nil {
				_ = scan() // a part that landed first wins
				dead(d)
			}
		case m := <-advisories:
			// Every holder of a task died (or timed out) on its last
			// delivery: nobody wrote its dead letter.
			var a maxDeliveriesAdvisory
			if json.Unmarshal(m.Data, &a) != nil || a.Stream != StreamName {
				continue
			}
			raw, err := st.GetMsg(ctx, a.StreamSeq)
			if err != nil {
				continue
			}
			var t Task
			if json.Unmarshal(raw.Data, &t) != nil || t.SweepID != id || t.Run != run || !pending[t.Index] {
				continue
			}
			if err := scan(); err != nil {
				return out, err
			}
			if !pending[t.Index] {
				continue
			}
			d := DeadLetter{SweepID: id, TaskID: t.ID(), Run: run, Index: t.Index, Values: t.Values, Attempts: int(a.Deliveries),
				Error: fmt.Sprintf("no result after %d deliveries: every worker holding it stopped or exceeded the ack wait (%s) without acknowledging",
					a.Deliveries, opts.Queue.AckWait)}
			if err := putDead(ctx, kv, d); err != nil {
				return out, err
			}
			_ = st.DeleteMsg(ctx, a.StreamSeq)
			// the watcher reports it
		case <-tick.C:
			if err := scan(); err != nil {
				return out, err
			}
		}
	}
	slices.Sort(out.Done)
	slices.SortFunc(out.Dead, func(a, b DeadLetter) int { return a.Index - b.Index })
	pctx, pc := context.WithTimeout(context.Background(), 5*time.Second)
	_ = st.Purge(pctx, jetstream.WithPurgeSubject(Subject(id)))
	pc()
	out.Elapsed = time.Since(start)
	emit(Event{Event: "complete"})
	return out, nil
}

// Result of a distributed sweep: the merged table and the submission.
type Result struct {
	Outcome *Outcome
	Merged  *Merged
}

// ErrDeadLetters reports a sweep that finished with dead-lettered points.
var ErrDeadLetters = errors.New("dead-lettered points")

// Run submits, follows and merges: the returned sweep result is the one a
// local sweep gives when no point was dead-lettered (write it with
// sweep.Write); otherwise it holds the points done, and the error wraps
// ErrDeadLetters.
func Run(ctx context.Context, js jetstream.JetStream, spec Spec, opts SubmitOptions) (*sweep.Result, *Outcome, error) {
	out, err := Submit(ctx, js, spec, opts)
	if err != nil {
		return nil, out, err
	}
	if len(out.Done) == 0 {
		return nil, out, fmt.Errorf("sweep %s: %w: all %d points failed", out.SweepID, ErrDeadLetters, out.Total)
	}
	m, err := Merge(opts.Results, out.SweepID)
	if err != nil {
		return nil, out, err
	}
	have := map[int]bool{}
	for _, p := range m.Result.Points {
		have[p.Index] = true
	}
	for _, i := range out.Done {
		if !have[i] {
			return nil, out, fmt.Errorf("sweep %s: point %d was done but its part is gone", out.SweepID, i)
		}
	}
	// A part that landed after its dead letter (a slow holder) counts.
	var dead []DeadLetter
	for _, d := range out.Dead {
		if !have[d.Index] {
			dead = append(dead, d)
		}
	}
	out.Dead = dead
	if len(out.Dead) > 0 {
		return m.Result, out, fmt.Errorf("sweep %s: %w: %d of %d points failed every delivery", out.SweepID, ErrDeadLetters, len(out.Dead), out.Total)
	}
	return m.Result, out, nil
}

// RunPoint runs point index of spec on its own and writes its part into
// dir: one pod of an Indexed Job (steplab sweep --point N).
func RunPoint(spec Spec, sweepID string, index int, dir string) (string, error) {
	if sweepID == "" {
		sweepID = spec.ID()
	}
	tasks, err := Plan(spec, sweepID, "")
	if err != nil {
		return "", err
	}
	if index < 0 || index >= len(tasks) {
		return "", fmt.Errorf("sweep: point %d out of range: the grid has %d points (0 to %d)", index, len(tasks), len(tasks)-1)
	}
	t := tasks[index]
	res, err := t.Execute()
	if err != nil {
		return "", err
	}
	return WritePart(dir, sweepID, t.Total, res)
}
