package dist

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// WorkerOptions tune RunWorker.
type WorkerOptions struct {
	// Results is the directory parts are written to (shared with the
	// submitter).
	Results string
	// Jobs is the number of tasks run at once (default 1).
	Jobs int
	// Name identifies the worker in dead letters (default host:pid).
	Name string
	// RetryDelay is the delay of a failed task's redelivery, times its
	// attempt number (default 1 s).
	RetryDelay time.Duration
	// FetchWait bounds one pull request (default 1 s); a stopped worker
	// exits within it.
	FetchWait time.Duration
	// WaitQueue bounds the wait for the submitter to create the stream
	// and consumer (0: until ctx ends).
	WaitQueue time.Duration
	// MaxIdle stops the worker after this long without a task (0: never).
	MaxIdle time.Duration
	// Limits cap every task's (the tighter of the two applies).
	Limits Limits
	// Log receives one line per task (default: discard).
	Log *slog.Logger
	// OnTask, when set, hears each finished attempt.
	OnTask func(TaskEvent)

	// Test hooks, called while the task is held (before the part is
	// written, before the ack); a hook's error abandons the task without
	// acknowledging it, as a killed worker would.
	beforeWrite, beforeAck func(*Task) error
}

// TaskEvent is one attempt of a task.
type TaskEvent struct {
	TaskID  string        `json:"task_id"`
	Index   int           `json:"index"`
	Attempt int           `json:"attempt"`
	Outcome string        `json:"outcome"` // done | retry | dead | refused | abandoned
	Error   string        `json:"error,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// WorkerStats counts a worker's attempts.
type WorkerStats struct {
	Done, Retried, Dead, Refused, Abandoned int64
}

var errAbandon = errors.New("task abandoned")

// RunWorker pulls the tasks of its results store (StoreID of
// opts.Results) until ctx ends (or MaxIdle passes without a task), checks
// each task's signature against its sweep's key, runs the point within its
// limits and writes its part. It returns nil when stopped by ctx or
// idleness, and an error when a point ran past its wall time or memory
// (the point cannot be interrupted: restart the worker).
func RunWorker(ctx context.Context, js jetstream.JetStream, opts WorkerOptions) (WorkerStats, error) {
	var stats WorkerStats
	if opts.Results == "" {
		return stats, fmt.Errorf("worker: no results directory")
	}
	store, err := StoreID(opts.Results)
	if err != nil {
		return stats, fmt.Errorf("worker: %w", err)
	}
	opts.defaults()
	q, err := waitQueue(ctx, js, store, opts)
	if err != nil || q == nil {
		return stats, err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go watchSweeps(ctx, q, &opts)
	opts.Log.Info("worker taking tasks", "store", store, "results", opts.Results, "subject", Subject(store, "*"))
	var last atomic.Int64 // unix ns of the last task
	last.Store(time.Now().UnixNano())
	var busy atomic.Int64
	var wg, acks sync.WaitGroup
	errs := make([]error, opts.Jobs)
	for j := 0; j < opts.Jobs; j++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if opts.MaxIdle > 0 && busy.Load() == 0 && time.Since(time.Unix(0, last.Load())) > opts.MaxIdle {
					return
				}
				msg, err := q.consumer.Next(jetstream.FetchMaxWait(opts.FetchWait))
				if err != nil {
					if errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) {
						continue
					}
					if ctx.Err() != nil {
						return
					}
					if errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
						errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, nats.ErrBadSubscription) {
						errs[j] = fmt.Errorf("worker: %w", err)
						return
					}
					opts.Log.Warn("pull", "err", err)
					time.Sleep(min(opts.FetchWait, 200*time.Millisecond))
					continue
				}
				busy.Add(1)
				ev, runaway := handle(ctx, msg, q, &opts, &acks)
				busy.Add(-1)
				last.Store(time.Now().UnixNano())
				stats.count(ev.Outcome)
				if opts.OnTask != nil {
					opts.OnTask(ev)
				}
				if runaway != nil {
					errs[j] = fmt.Errorf("worker: %w; stopping, since the point cannot be interrupted", runaway)
					stop()
					return
				}
			}
		}()
	}
	wg.Wait()
	acks.Wait()
	return stats, errors.Join(errs...)
}

func (o *WorkerOptions) defaults() {
	if o.Jobs <= 0 {
		o.Jobs = 1
	}
	if o.Name == "" {
		h, _ := os.Hostname()
		o.Name = h + ":" + strconv.Itoa(os.Getpid())
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = time.Second
	}
	if o.FetchWait <= 0 {
		o.FetchWait = time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

func (s *WorkerStats) count(outcome string) {
	switch outcome {
	case "done":
		atomic.AddInt64(&s.Done, 1)
	case "retry":
		atomic.AddInt64(&s.Retried, 1)
	case "dead":
		atomic.AddInt64(&s.Dead, 1)
	case "refused":
		atomic.AddInt64(&s.Refused, 1)
	default:
		atomic.AddInt64(&s.Abandoned, 1)
	}
}

// waitQueue waits for the store's consumer and the buckets.
func waitQueue(ctx context.Context, js jetstream.JetStream, store string, opts WorkerOptions) (*queue, error) {
	var deadline <-chan time.Time
	if opts.WaitQueue > 0 {
		t := time.NewTimer(opts.WaitQueue)
		defer t.Stop()
		deadline = t.C
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		q, err := openQueue(ctx, js, store)
		if err == nil {
			return q, nil
		}
		if !errors.Is(err, errNotYet) {
			return nil, fmt.Errorf("worker: %w", err)
		}
		opts.Log.Debug("waiting for a sweep of this results store", "stream", StreamName, "consumer", ConsumerName(store))
		select {
		case <-ctx.Done():
			return nil, nil
		case <-deadline:
			return nil, fmt.Errorf("worker: no consumer %s on stream %s after %s: has a sweep been submitted with --results %s?",
				ConsumerName(store), StreamName, opts.WaitQueue, opts.Results)
		case <-tick.C:
		}
	}
}

// watchSweeps logs, once each, the sweeps submitted for this worker's
// results store and those for others (whose tasks it never sees).
func watchSweeps(ctx context.Context, q *queue, opts *WorkerOptions) {
	w, err := q.sweeps.WatchAll(ctx)
	if err != nil {
		opts.Log.Warn("cannot watch the submitted sweeps", "bucket", SweepsBucket, "err", err)
		return
	}
	defer w.Stop()
	seen := map[string]string{}
	for e := range w.Updates() {
		if e == nil || e.Operation() != jetstream.KeyValuePut {
			continue
		}
		var m SweepMeta
		if json.Unmarshal(e.Value(), &m) != nil || seen[m.SweepID] == m.Run {
			continue
		}
		seen[m.SweepID] = m.Run
		if m.Store == q.store {
			opts.Log.Info("taking sweep", "sweep", m.SweepID, "points", m.Total, "store", m.Store)
		} else {
			opts.Log.Warn("not taking sweep: its parts go to another results store", "sweep", m.SweepID, "points", m.Total,
				"its_store", m.Store, "this_store", q.store, "results", opts.Results)
		}
	}
}

// handle runs one delivery of a task; a non-nil error is a runaway point.
func handle(ctx context.Context, msg jetstream.Msg, q *queue, opts *WorkerOptions, acks *sync.WaitGroup) (TaskEvent, error) {
	start := time.Now()
	attempt := 1
	if md, err := msg.Metadata(); err == nil {
		attempt = int(md.NumDelivered)
	}
	t, err := q.verify(ctx, msg)
	if err != nil {
		ev := TaskEvent{TaskID: msg.Subject(), Index: -1, Attempt: attempt, Error: err.Error()}
		var ref *refusal
		if errors.As(err, &ref) {
			ev.Outcome = "refused"
			_ = msg.TermWithReason(truncate("refused: "+ref.Error(), 200))
			opts.Log.Error("refused task", "subject", msg.Subject(), "reason", ref.Error())
			return ev, nil
		}
		ev.Outcome = "retry"
		_ = msg.NakWithDelay(opts.RetryDelay * time.Duration(attempt))
		opts.Log.Warn("cannot check the task, will retry", "subject", msg.Subject(), "err", err)
		return ev, nil
	}
	ev := TaskEvent{TaskID: t.ID(), Index: t.Index, Attempt: attempt}
	key := DeadKey(t.SweepID, t.Index)
	if hb, err := json.Marshal(Held{Worker: opts.Name, Since: start.UTC().Format(time.RFC3339), Attempt: attempt}); err == nil {
		_, _ = q.held.Put(ctx, key, hb)
	}
	stopHB := heartbeat(ctx, msg, t)
	err = run(ctx, t, opts)
	stopHB()
	_ = q.held.Delete(context.Background(), key)
	ev.Elapsed = time.Since(start)
	if errors.Is(err, errAbandon) || ctx.Err() != nil {
		// Stopped while holding the task: hand it back (nak) so that the
		// server redelivers it at once. A worker killed, or whose
		// connection is gone, cannot: the server redelivers after AckWait.
		_ = msg.Nak()
		ev.Outcome = "abandoned"
		opts.Log.Info("task abandoned", "task", ev.TaskID, "attempt", attempt)
		return ev, nil
	}
	if err != nil {
		return failed(ev, msg, q, t, err, opts)
	}
	// The part is durable: acknowledge, and wait for the server's
	// confirmation while the next task is pulled (acks.Wait before the
	// worker returns). Were the ack lost, the redelivery would rewrite the
	// same part.
	acks.Add(1)
	go func() {
		defer acks.Done()
		actx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if aerr := msg.DoubleAck(actx); aerr != nil {
			opts.Log.Warn("ack", "task", ev.TaskID, "err", aerr)
		}
	}()
	ev.Outcome = "done"
	opts.Log.Info("task done", "task", ev.TaskID, "attempt", attempt, "elapsed", ev.Elapsed)
	return ev, nil
}

// heartbeat tells the server the task is in progress every AckWait/3,
// so a point longer than AckWait is not redelivered while this worker
// lives; the returned func stops it.
func heartbeat(ctx context.Context, msg jetstream.Msg, t *Task) func() {
	ackWait := time.Duration(t.AckWaitNs)
	if ackWait <= 0 {
		ackWait = DefaultAckWait
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(max(ackWait/3, 10*time.Millisecond))
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tk.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// failed retries a failed attempt, or dead-letters it (its last delivery,
// or a limit): the dead letter and the termination reason carry the safe
// message, the log the whole error.
func failed(ev TaskEvent, msg jetstream.Msg, q *queue, t *Task, err error, opts *WorkerOptions) (TaskEvent, error) {
	ev.Error = err.Error()
	maxDeliver := t.MaxDeliver
	if maxDeliver <= 0 {
		maxDeliver = DefaultMaxDeliver
	}
	var lim *limitError
	isLimit := errors.As(err, &lim)
	if !isLimit && ev.Attempt < maxDeliver {
		ev.Outcome = "retry"
		_ = msg.NakWithDelay(opts.RetryDelay * time.Duration(ev.Attempt))
		opts.Log.Warn("task failed, will retry", "task", ev.TaskID, "attempt", ev.Attempt, "err", err)
		return ev, nil
	}
	ev.Outcome = "dead"
	safe := SafeError(t, err)
	d := DeadLetter{SweepID: t.SweepID, TaskID: t.ID(), Run: t.Run, Index: t.Index, Values: t.Values,
		Attempts: ev.Attempt, Error: safe, Worker: opts.Name}
	var runaway error
	if isLimit && lim.runaway {
		runaway = lim
	}
	if perr := putDead(context.Background(), q.dead, d); perr != nil {
		// Leave the message unacknowledged: the server's MAX_DELIVERIES
		// advisory lets the submitter record it.
		opts.Log.Error("dead letter", "task", ev.TaskID, "err", perr)
		return ev, runaway
	}
	_ = msg.TermWithReason(truncate(safe, 200))
	opts.Log.Error("task dead-lettered", "task", ev.TaskID, "attempts", ev.Attempt, "err", err)
	return ev, runaway
}

// run executes the point within its limits and writes its part.
func run(ctx context.Context, t *Task, opts *WorkerOptions) error {
	res, err := runBounded(t, t.Limits.Tighter(opts.Limits))
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return errAbandon
	}
	if opts.beforeWrite != nil {
		if err := opts.beforeWrite(t); err != nil {
			return errAbandon
		}
	}
	if _, err := WritePart(opts.Results, t.SweepID, t.Total, t.Digest(), res); err != nil {
		return fmt.Errorf("%s: writing its part: %w", t.Describe(), err)
	}
	if opts.beforeAck != nil {
		if err := opts.beforeAck(t); err != nil {
			return errAbandon
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
