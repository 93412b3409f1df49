package distsweep

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
	Outcome string        `json:"outcome"` // done | retry | dead | abandoned
	Error   string        `json:"error,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// WorkerStats counts a worker's attempts.
type WorkerStats struct {
	Done, Retried, Dead, Abandoned int64
}

var errAbandon = errors.New("task abandoned")

// RunWorker pulls tasks from the workers' consumer until ctx ends (or
// MaxIdle passes without a task), runs each point and writes its part. It
// returns nil when stopped by ctx or idleness.
func RunWorker(ctx context.Context, js jetstream.JetStream, opts WorkerOptions) (WorkerStats, error) {
	var stats WorkerStats
	if opts.Results == "" {
		return stats, fmt.Errorf("worker: no results directory")
	}
	if err := os.MkdirAll(opts.Results, 0o755); err != nil {
		return stats, err
	}
	if opts.Jobs <= 0 {
		opts.Jobs = 1
	}
	if opts.Name == "" {
		h, _ := os.Hostname()
		opts.Name = h + ":" + strconv.Itoa(os.Getpid())
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = time.Second
	}
	if opts.FetchWait <= 0 {
		opts.FetchWait = time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	cons, kv, err := waitQueue(ctx, js, opts)
	if err != nil || cons == nil {
		return stats, err
	}
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
				msg, err := cons.Next(jetstream.FetchMaxWait(opts.FetchWait))
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
				ev := handle(ctx, msg, kv, &opts, &acks)
				busy.Add(-1)
				last.Store(time.Now().UnixNano())
				switch ev.Outcome {
				case "done":
					atomic.AddInt64(&stats.Done, 1)
				case "retry":
					atomic.AddInt64(&stats.Retried, 1)
				case "dead":
					atomic.AddInt64(&stats.Dead, 1)
				default:
					atomic.AddInt64(&stats.Abandoned, 1)
				}
				if opts.OnTask != nil {
					opts.OnTask(ev)
				}
			}
		}()
	}
	wg.Wait()
	acks.Wait()
	return stats, errors.Join(errs...)
}

// waitQueue waits for the consumer and the dead-letter bucket.
func waitQueue(ctx context.Context, js jetstream.JetStream, opts WorkerOptions) (jetstream.Consumer, jetstream.KeyValue, error) {
	var deadline <-chan time.Time
	if opts.WaitQueue > 0 {
		t := time.NewTimer(opts.WaitQueue)
		defer t.Stop()
		deadline = t.C
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := js.Consumer(ctx, StreamName, ConsumerName)
		if err == nil {
			kv, kerr := js.KeyValue(ctx, DeadBucket)
			if kerr == nil {
				return c, kv, nil
			}
			err = kerr
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) && !errors.Is(err, jetstream.ErrConsumerNotFound) &&
			!errors.Is(err, jetstream.ErrBucketNotFound) && !errors.Is(err, context.DeadlineExceeded) {
			return nil, nil, fmt.Errorf("worker: %w", err)
		}
		opts.Log.Debug("waiting for the sweep queue", "stream", StreamName, "consumer", ConsumerName)
		select {
		case <-ctx.Done():
			return nil, nil, nil
		case <-deadline:
			return nil, nil, fmt.Errorf("worker: no stream %s with consumer %s after %s: has a sweep been submitted?",
				StreamName, ConsumerName, opts.WaitQueue)
		case <-tick.C:
		}
	}
}

// handle runs one delivery of a task.
func handle(ctx context.Context, msg jetstream.Msg, kv jetstream.KeyValue, opts *WorkerOptions, acks *sync.WaitGroup) TaskEvent {
	start := time.Now()
	attempt := 1
	if md, err := msg.Metadata(); err == nil {
		attempt = int(md.NumDelivered)
	}
	var t Task
	if err := json.Unmarshal(msg.Data(), &t); err != nil {
		// Not a task: no point, no part, no retry.
		_ = msg.TermWithReason("not a steplab task")
		opts.Log.Error("not a task", "subject", msg.Subject(), "err", err)
		return TaskEvent{TaskID: msg.Subject(), Index: -1, Attempt: attempt, Outcome: "dead", Error: err.Error()}
	}
	ev := TaskEvent{TaskID: t.ID(), Index: t.Index, Attempt: attempt}
	ackWait := time.Duration(t.AckWaitNs)
	if ackWait <= 0 {
		ackWait = DefaultAckWait
	}
	maxDeliver := t.MaxDeliver
	if maxDeliver <= 0 {
		maxDeliver = DefaultMaxDeliver
	}
	// Heartbeats: tell the server the task is in progress, so a point
	// longer than AckWait is not redelivered while this worker lives.
	hbDone := make(chan struct{})
	var hbWG sync.WaitGroup
	hbWG.Add(1)
	go func() {
		defer hbWG.Done()
		tk := time.NewTicker(max(ackWait/3, 10*time.Millisecond))
		defer tk.Stop()
		for {
			select {
			case <-hbDone:
				return
			case <-ctx.Done():
				return
			case <-tk.C:
				_ = msg.InProgress()
			}
		}
	}()
	stopHB := func() { close(hbDone); hbWG.Wait() }

	err := run(ctx, &t, opts)
	stopHB()
	ev.Elapsed = time.Since(start)
	if errors.Is(err, errAbandon) || ctx.Err() != nil {
		// Stopped while holding the task: no ack, no nak; the server
		// redelivers it after AckWait.
		ev.Outcome = "abandoned"
		opts.Log.Info("task abandoned", "task", ev.TaskID, "attempt", attempt)
		return ev
	}
	if err != nil {
		ev.Error = err.Error()
		if attempt >= maxDeliver {
			ev.Outcome = "dead"
			d := DeadLetter{SweepID: t.SweepID, TaskID: t.ID(), Run: t.Run, Index: t.Index, Values: t.Values,
				Attempts: attempt, Error: err.Error(), Worker: opts.Name}
			if perr := putDead(context.Background(), kv, d); perr != nil {
				// Leave the message unacknowledged: the server's
				// MAX_DELIVERIES advisory lets the submitter record it.
				opts.Log.Error("dead letter", "task", ev.TaskID, "err", perr)
				return ev
			}
			_ = msg.TermWithReason(truncate(err.Error(), 200))
			opts.Log.Error("task dead-lettered", "task", ev.TaskID, "attempts", attempt, "err", err)
			return ev
		}
		ev.Outcome = "retry"
		_ = msg.NakWithDelay(opts.RetryDelay * time.Duration(attempt))
		opts.Log.Warn("task failed, will retry", "task", ev.TaskID, "attempt", attempt, "err", err)
		return ev
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
	return ev
}

// run executes the point and writes its part.
func run(ctx context.Context, t *Task, opts *WorkerOptions) error {
	res, err := t.Execute()
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
	if _, err := WritePart(opts.Results, t.SweepID, t.Total, res); err != nil {
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
