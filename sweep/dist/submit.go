package dist

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/steplab/steplab/sweep"
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
	// Report is the period of the pending events (default 1 min).
	Report time.Duration
	// Resume keeps the parts of an earlier submission of the same sweep
	// and submits only the missing points; otherwise they are removed
	// first.
	Resume bool
	// Limits bound every task's work (the workers enforce them).
	Limits Limits
	// Events, when set, hears the sweep's progress (from one goroutine).
	Events func(Event)

	// Test hooks: mutate edits each task before it is signed;
	// beforePublish runs once the sweep's key is recorded.
	mutate        func(*Task)
	beforePublish func(store, subject string)
}

// Event is a progress event of a distributed sweep (the --json lines).
type Event struct {
	Event   string `json:"event"` // submitted | held | pending | done | refused | dead | timeout | complete
	SweepID string `json:"sweep_id"`
	TaskID  string `json:"task_id,omitempty"`
	Index   *int   `json:"index,omitempty"`
	Error   string `json:"error,omitempty"`
	// Attempts of a dead task (the delivery of a held one).
	Attempts int `json:"attempts,omitempty"`
	// Worker holds the point since Since (a held event; a pending event:
	// the point held longest).
	Worker string `json:"worker,omitempty"`
	Since  string `json:"since,omitempty"`
	Done   int    `json:"done"`
	Dead   int    `json:"dead"`
	Total  int    `json:"total"`
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
	// digests are the points' input digests, which the merge checks.
	digests map[int]string
}

// maxDeliveriesAdvisory is the server's JSConsumerDeliveryExceededAdvisory.
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// submission is one Submit's state while it follows its sweep.
type submission struct {
	opts    SubmitOptions
	q       *queue
	id, run string
	subject string
	start   time.Time
	tasks   []Task
	digests map[int]string
	pending map[int]bool
	// refused: the digest of a part already reported as not the point's.
	refused map[int]string
	held    map[int]Held
	out     *Outcome
}

func (s *submission) emit(e Event) {
	e.SweepID, e.Total, e.Done, e.Dead = s.id, len(s.tasks), len(s.out.Done), len(s.out.Dead)
	e.ElapsedS = time.Since(s.start).Seconds()
	if s.opts.Events != nil {
		s.opts.Events(e)
	}
}

// Submit publishes every point of spec as a task signed with a key of this
// submission, for the results store of opts.Results, and follows the sweep
// until each point has a part (from its own inputs) in opts.Results or a
// dead letter, or the timeout passes. It does not merge (see Merge). An
// error means the sweep could not be submitted or followed; a timeout is
// reported in the Outcome's Pending, with an error naming the holders.
func Submit(ctx context.Context, js jetstream.JetStream, spec Spec, opts SubmitOptions) (*Outcome, error) {
	s, err := newSubmission(ctx, js, spec, opts)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Watch before publishing, so that nothing is missed.
	dead, err := s.q.dead.Watch(wctx, s.id+".*", jetstream.UpdatesOnly())
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", DeadBucket, err)
	}
	defer dead.Stop()
	held, err := s.q.held.Watch(wctx, s.id+".*", jetstream.UpdatesOnly())
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", HeldBucket, err)
	}
	defer held.Stop()
	advisories := make(chan *nats.Msg, 256)
	sub, err := js.Conn().ChanSubscribe(fmt.Sprintf("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.%s.%s", StreamName,
		ConsumerName(s.q.store)), advisories)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	if err := s.publish(ctx, js); err != nil {
		return nil, err
	}
	return s.follow(ctx, dead, held, advisories)
}

// newSubmission plans the tasks, ensures the queue and sorts the points
// into done (a part of an earlier submission, with --resume) and pending.
func newSubmission(ctx context.Context, js jetstream.JetStream, spec Spec, opts SubmitOptions) (*submission, error) {
	s := &submission{opts: opts, start: time.Now(), run: newRun(), pending: map[int]bool{}, refused: map[int]string{},
		held: map[int]Held{}, digests: map[int]string{}}
	if opts.Results == "" {
		return nil, fmt.Errorf("sweep: no results directory for the workers' parts")
	}
	s.id = opts.SweepID
	if s.id == "" {
		s.id = spec.ID()
	}
	if s.opts.Poll <= 0 {
		s.opts.Poll = 200 * time.Millisecond
	}
	s.opts.Queue = opts.Queue.withDefaults()
	var err error
	if s.tasks, err = Plan(spec, s.id, s.run); err != nil {
		return nil, err
	}
	store, err := StoreID(opts.Results)
	if err != nil {
		return nil, err
	}
	if s.q, err = Ensure(ctx, js, store, s.opts.Queue); err != nil {
		return nil, err
	}
	s.subject = Subject(store, s.id)
	s.out = &Outcome{SweepID: s.id, Run: s.run, Total: len(s.tasks)}
	// Leftovers of an earlier submission of this sweep id.
	if err := s.q.stream.Purge(ctx, jetstream.WithPurgeSubject(s.subject)); err != nil {
		return nil, fmt.Errorf("purging %s: %w", s.subject, err)
	}
	existing, err := PartsIn(opts.Results)
	if err != nil {
		return nil, err
	}
	for i := range s.tasks {
		t := &s.tasks[i]
		t.AckWaitNs, t.MaxDeliver, t.Limits = int64(s.opts.Queue.AckWait), s.opts.Queue.MaxDeliver, opts.Limits
		if opts.mutate != nil {
			opts.mutate(t)
		}
		s.digests[t.Index] = t.Digest()
		if p, ok := existing[s.id][t.Index]; ok {
			if pm, err := ReadPart(p); err == nil && opts.Resume && pm.Digest == s.digests[t.Index] {
				s.out.Done = append(s.out.Done, t.Index)
				continue
			}
			if err := os.Remove(p); err != nil {
				return nil, err
			}
		}
		s.pending[t.Index] = true
	}
	s.out.digests = s.digests
	return s, nil
}

// publish records the submission's key, then signs and publishes its
// pending tasks.
func (s *submission) publish(ctx context.Context, js jetstream.JetStream) error {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	if err := s.q.putMeta(ctx, SweepMeta{SweepID: s.id, Run: s.run, Store: s.q.store, Total: len(s.tasks), PublicKey: pub}); err != nil {
		return err
	}
	if s.opts.beforePublish != nil {
		s.opts.beforePublish(s.q.store, s.subject)
	}
	sg := signer{priv}
	for i := range s.tasks {
		t := &s.tasks[i]
		if !s.pending[t.Index] {
			continue
		}
		b, err := json.Marshal(t)
		if err != nil {
			return err
		}
		if _, err := js.PublishMsg(ctx, sg.msg(s.subject, b), jetstream.WithMsgID(t.ID()+"."+s.run)); err != nil {
			return fmt.Errorf("publishing %s: %w", t.ID(), err)
		}
	}
	s.emit(Event{Event: "submitted"})
	for _, i := range s.out.Done {
		s.emit(Event{Event: "done", TaskID: TaskID(s.id, i), Index: &i})
	}
	return nil
}

// follow waits for parts, dead letters and advisories until no point is
// pending or the timeout.
func (s *submission) follow(ctx context.Context, dead, held jetstream.KeyWatcher, advisories chan *nats.Msg) (*Outcome, error) {
	var deadline <-chan time.Time
	if s.opts.Timeout > 0 {
		tm := time.NewTimer(s.opts.Timeout)
		defer tm.Stop()
		deadline = tm.C
	}
	tick := time.NewTicker(s.opts.Poll)
	defer tick.Stop()
	report := time.NewTicker(cmp.Or(s.opts.Report, time.Minute))
	defer report.Stop()
	for len(s.pending) > 0 {
		var err error
		select {
		case <-ctx.Done():
			return s.out, ctx.Err()
		case <-deadline:
			return s.out, s.timeout()
		case e, ok := <-dead.Updates():
			if !ok {
				return s.out, fmt.Errorf("dead-letter watch stopped")
			}
			var d DeadLetter
			if e != nil && e.Operation() == jetstream.KeyValuePut && json.Unmarshal(e.Value(), &d) == nil {
				err = s.scan() // a part that landed first wins
				s.dead(d)
			}
		case e := <-held.Updates():
			s.holder(e)
		case m := <-advisories:
			err = s.advisory(ctx, m)
		case <-tick.C:
			err = s.scan()
		case <-report.C:
			s.emit(s.pendingEvent())
		}
		if err != nil {
			return s.out, err
		}
	}
	slices.Sort(s.out.Done)
	slices.SortFunc(s.out.Dead, func(a, b DeadLetter) int { return a.Index - b.Index })
	s.purge()
	s.out.Elapsed = time.Since(s.start)
	s.emit(Event{Event: "complete"})
	return s.out, nil
}

func (s *submission) purge() {
	pctx, pc := context.WithTimeout(context.Background(), 5*time.Second)
	defer pc()
	_ = s.q.stream.Purge(pctx, jetstream.WithPurgeSubject(s.subject))
}

// timeout ends the wait: the pending points, each with its holder.
func (s *submission) timeout() error {
	_ = s.scan()
	for i := range s.pending {
		s.out.Pending = append(s.out.Pending, i)
	}
	slices.Sort(s.out.Pending)
	s.purge()
	s.out.Elapsed = time.Since(s.start)
	var who []string
	for _, i := range s.out.Pending {
		if h, ok := s.held[i]; ok {
			who = append(who, fmt.Sprintf("point %d held by %s since %s (delivery %d)", i, h.Worker, h.Since, h.Attempt))
		}
	}
	held := "no worker held any"
	if len(who) > 0 {
		held = strings.Join(who, "; ")
	}
	s.emit(Event{Event: "timeout", Error: fmt.Sprintf("%d points neither done nor dead-lettered: %s", len(s.out.Pending), held)})
	return fmt.Errorf("sweep %s: timed out after %s with %d of %d points pending (%s; see `steplab worker`; resubmit with --resume to keep the %d done)",
		s.id, s.opts.Timeout, len(s.out.Pending), len(s.tasks), held, len(s.out.Done))
}

// pendingEvent counts the pending points and names the one held longest.
func (s *submission) pendingEvent() Event {
	e := Event{Event: "pending", Error: fmt.Sprintf("%d points pending, %d of them held by a worker", len(s.pending), len(s.held))}
	for i, h := range s.held {
		if e.Index == nil || h.Since < e.Since || (h.Since == e.Since && i < *e.Index) {
			e.Index, e.TaskID, e.Worker, e.Since, e.Attempts = &i, TaskID(s.id, i), h.Worker, h.Since, h.Attempt
		}
	}
	return e
}

// holder records (and reports) which worker took a pending point.
func (s *submission) holder(e jetstream.KeyValueEntry) {
	if e == nil {
		return
	}
	var i int
	if _, err := fmt.Sscanf(strings.TrimPrefix(e.Key(), s.id+"."), "%d", &i); err != nil || !s.pending[i] {
		return
	}
	if e.Operation() != jetstream.KeyValuePut {
		delete(s.held, i)
		return
	}
	var h Held
	if json.Unmarshal(e.Value(), &h) == nil {
		s.held[i] = h
		s.emit(Event{Event: "held", TaskID: TaskID(s.id, i), Index: &i, Worker: h.Worker, Since: h.Since, Attempts: h.Attempt})
	}
}

// scan moves the pending points with a part run from their own inputs to
// done; a part from other inputs is reported once and left pending.
func (s *submission) scan() error {
	parts, err := PartsIn(s.opts.Results)
	if err != nil {
		return err
	}
	var idx []int
	for i := range parts[s.id] {
		if s.pending[i] {
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	for _, i := range idx {
		pm, err := ReadPart(parts[s.id][i])
		if err != nil {
			continue // being replaced, or damaged: its redelivery rewrites it
		}
		if pm.Digest != s.digests[i] {
			if s.refused[i] != pm.Digest {
				s.refused[i] = pm.Digest
				de := &DigestError{Index: i, Got: pm.Digest, Want: s.digests[i]}
				s.emit(Event{Event: "refused", TaskID: TaskID(s.id, i), Index: &i, Error: de.Error()})
			}
			continue
		}
		delete(s.pending, i)
		s.out.Done = append(s.out.Done, i)
		s.emit(Event{Event: "done", TaskID: TaskID(s.id, i), Index: &i})
	}
	return nil
}

// dead records a dead letter of this submission.
func (s *submission) dead(d DeadLetter) {
	if d.SweepID != s.id || d.Run != s.run || !s.pending[d.Index] {
		return
	}
	delete(s.pending, d.Index)
	s.out.Dead = append(s.out.Dead, d)
	i := d.Index
	s.emit(Event{Event: "dead", TaskID: d.TaskID, Index: &i, Error: d.Error, Attempts: d.Attempts})
}

// advisory dead-letters a task whose every holder died (or timed out) on
// its last delivery: nobody wrote its dead letter.
func (s *submission) advisory(ctx context.Context, m *nats.Msg) error {
	var a maxDeliveriesAdvisory
	if json.Unmarshal(m.Data, &a) != nil || a.Stream != StreamName {
		return nil
	}
	raw, err := s.q.stream.GetMsg(ctx, a.StreamSeq)
	if err != nil {
		return nil
	}
	var t Task
	if raw.Subject != s.subject || json.Unmarshal(raw.Data, &t) != nil || t.Run != s.run || !s.pending[t.Index] {
		return nil
	}
	if err := s.scan(); err != nil || !s.pending[t.Index] {
		return err
	}
	d := DeadLetter{SweepID: s.id, TaskID: t.ID(), Run: s.run, Index: t.Index, Values: t.Values, Attempts: int(a.Deliveries),
		Error: fmt.Sprintf("no result after %d deliveries: every worker holding it stopped or exceeded the ack wait (%s) without acknowledging",
			a.Deliveries, s.opts.Queue.AckWait)}
	if err := putDead(ctx, s.q.dead, d); err != nil {
		return err
	}
	_ = s.q.stream.DeleteMsg(ctx, a.StreamSeq)
	return nil // the watcher reports it
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
	m, err := Merge(opts.Results, out.SweepID, out.digests)
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
	res, err := t.Execute(t.Limits.MaxSteps)
	if err != nil {
		return "", err
	}
	return WritePart(dir, sweepID, t.Total, t.Digest(), res)
}
