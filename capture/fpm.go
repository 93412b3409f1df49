package capture

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"strconv"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/importers"
)

// FPMOptions configure SubscribeFPM.
type FPMOptions struct {
	// Duration stops the subscription after this long (0: no limit).
	Duration time.Duration
	// MaxSteps stops it after this many steps were written (0: no limit).
	MaxSteps int64
	// CheckpointEvery makes the rows received so far durable (a completed
	// part, listed in the manifest) this often; 0 means 5 s. A subscriber
	// killed without warning loses at most this much.
	CheckpointEvery time.Duration
	// DialTimeout bounds the wait for the publisher's port to accept the
	// connection (0: 10 s). Once connected, a silent publisher is waited
	// for until Duration or the context ends.
	DialTimeout time.Duration
	// Overwrite replaces an existing dataset at dir.
	Overwrite bool
	// Command is recorded in the manifest.
	Command []string
	// Progress, when set, is called after every message with the counts so
	// far (from the subscriber's goroutine; keep it quick).
	Progress func(FPMResult)
	// Reconnect is the first wait before re-dialling a publisher that went
	// away; it doubles after each failed attempt, up to ReconnectMax. 0: a
	// publisher going away ends the subscription.
	Reconnect, ReconnectMax time.Duration
	// Logf, when set, is told of a publisher going away, each reconnection
	// and how many messages were missed meanwhile.
	Logf func(format string, args ...any)
	// maxGapRanges bounds FPMResult.Gaps (0: 1000); tests lower it.
	maxGapRanges int
}

// FPMGap is one run of missing messages: numbers From..To (inclusive)
// never arrived on the stream named by Field.
type FPMGap struct {
	// Field is "sequence" (the 8-byte transport sequence number of the
	// publisher socket) or "counter_id" (the engine's step counter of one
	// worker_id and dp_rank).
	Field    string `json:"field"`
	WorkerID string `json:"worker_id,omitempty"`
	DPRank   int64  `json:"dp_rank"`
	From     int64  `json:"from"`
	To       int64  `json:"to"`
}

// Missing is the number of messages the gap stands for.
func (g FPMGap) Missing() int64 { return g.To - g.From + 1 }

func (g FPMGap) String() string {
	if g.Field == "sequence" {
		return fmt.Sprintf("sequence %d..%d (%d missing)", g.From, g.To, g.Missing())
	}
	return fmt.Sprintf("counter_id %d..%d of worker %q dp_rank %d (%d missing)", g.From, g.To, g.WorkerID, g.DPRank, g.Missing())
}

// Stop reasons of an FPM subscription (FPMResult.StopReason).
const (
	FPMStopDuration = "duration"
	FPMStopMaxSteps = "max_steps"
	// FPMStopCanceled: the context ended (SIGINT or SIGTERM in the CLI).
	FPMStopCanceled = "canceled"
	// FPMStopPublisherGone: the publisher went away and reconnecting was
	// off (FPMOptions.Reconnect 0).
	FPMStopPublisherGone = "publisher_gone"
)

// FPMResult summarises a subscription.
type FPMResult struct {
	Dataset  string `json:"dataset"`
	Endpoint string `json:"endpoint"`
	// Status is the dataset's manifest status: complete after a clean stop.
	Status     string  `json:"status"`
	StopReason string  `json:"stop_reason"`
	ElapsedS   float64 `json:"elapsed_s"`

	// Messages counts every multipart message received.
	Messages int64 `json:"messages"`
	// Steps counts the rows written to the steps table.
	Steps int64 `json:"steps"`
	// Heartbeats: idle heartbeats (wall_time 0, nothing scheduled), skipped.
	Heartbeats int64 `json:"heartbeats"`
	// Empty: messages with a wall time but nothing scheduled, skipped.
	Empty int64 `json:"empty"`
	// Malformed: messages that are not (empty, 8-byte sequence, msgpack
	// ForwardPassMetrics), skipped; FirstMalformed says why the first was.
	Malformed      int64  `json:"malformed"`
	FirstMalformed string `json:"first_malformed,omitempty"`

	// SequenceGaps and SequenceMissing count holes in the transport
	// sequence; CounterGaps and CounterMissing holes in counter_id.
	SequenceGaps    int64 `json:"sequence_gaps"`
	SequenceMissing int64 `json:"sequence_missing"`
	CounterGaps     int64 `json:"counter_gaps"`
	CounterMissing  int64 `json:"counter_missing"`
	// Restarts counts a sequence or counter_id that went backwards (the
	// publisher restarted).
	Restarts int64 `json:"restarts"`
	// Disconnects counts the times the publisher went away; Reconnects the
	// times the subscription got it back.
	Disconnects int64 `json:"disconnects"`
	Reconnects  int64 `json:"reconnects"`
	// Gaps lists the holes in order of arrival (the first 1000).
	Gaps []FPMGap `json:"gaps,omitempty"`
	// Workers lists the (worker_id, dp_rank) pairs seen, as "id/rank".
	Workers []string `json:"workers,omitempty"`
}

// fpmKey identifies one engine scheduler.
type fpmKey struct {
	worker string
	rank   int64
}

// fpmState tracks sequence numbers and counters across messages.
type fpmState struct {
	res       *FPMResult
	maxRanges int

	haveSeq bool
	lastSeq uint64
	counter map[fpmKey]int64 // last counter_id > 0 seen
	stepID  map[fpmKey]int64 // last step_id written
	renumb  int64            // steps whose step_id could not be counter_id
}

func (s *fpmState) gap(g FPMGap) {
	if len(s.res.Gaps) < s.maxRanges {
		s.res.Gaps = append(s.res.Gaps, g)
	}
}

// observe accounts for one message's sequence number.
func (s *fpmState) observeSeq(seq uint64) {
	if s.haveSeq {
		switch {
		case seq > s.lastSeq+1:
			s.res.SequenceGaps++
			s.res.SequenceMissing += int64(seq - s.lastSeq - 1)
			s.gap(FPMGap{Field: "sequence", From: int64(s.lastSeq + 1), To: int64(seq - 1)})
		case seq <= s.lastSeq:
			s.res.Restarts++
		}
	}
	s.haveSeq, s.lastSeq = true, seq
}

// observeCounter accounts for a message's counter_id. Dynamo's publisher
// stamps every message, heartbeats included, with its send sequence from 0;
// a counter of 0 (a publisher's first message, or one from before Dynamo
// had counter_id) starts nothing to compare against.
func (s *fpmState) observeCounter(f importers.FPM) {
	if f.CounterID <= 0 {
		return
	}
	k := fpmKey{f.WorkerID, f.DPRank}
	if prev, ok := s.counter[k]; ok {
		switch {
		case f.CounterID > prev+1:
			s.res.CounterGaps++
			s.res.CounterMissing += f.CounterID - prev - 1
			s.gap(FPMGap{Field: "counter_id", WorkerID: f.WorkerID, DPRank: f.DPRank, From: prev + 1, To: f.CounterID - 1})
		case f.CounterID < prev:
			s.res.Restarts++
		}
	}
	s.counter[k] = f.CounterID
}

// step converts a message to a row. step_id is counter_id where that keeps
// the worker's step ids increasing; otherwise the previous step_id + 1.
func (s *fpmState) step(f importers.FPM) datasets.Step {
	st := f.Step()
	k := fpmKey{f.WorkerID, f.DPRank}
	prev, ok := s.stepID[k]
	if !ok {
		s.res.Workers = append(s.res.Workers, f.WorkerID+"/"+strconv.FormatInt(f.DPRank, 10))
	}
	if f.CounterID <= 0 || (ok && f.CounterID <= prev) {
		if ok {
			st.StepID = prev + 1
		} else {
			st.StepID = 0
		}
		if f.CounterID > 0 || ok {
			s.renumb++
		}
	}
	s.stepID[k] = st.StepID
	return st
}

// parseFPMMessage splits a message of Dynamo's FPM socket: frames (empty
// topic, 8-byte big-endian sequence, msgpack payload).
func parseFPMMessage(frames [][]byte) (uint64, importers.FPM, error) {
	if len(frames) != 3 {
		return 0, importers.FPM{}, fmt.Errorf("%d frames (want 3: empty topic, 8-byte sequence, msgpack payload)", len(frames))
	}
	if len(frames[1]) != 8 {
		return 0, importers.FPM{}, fmt.Errorf("sequence frame of %d bytes (want 8)", len(frames[1]))
	}
	seq := binary.BigEndian.Uint64(frames[1])
	f, err := importers.DecodeFPM(frames[2])
	if err != nil {
		return seq, f, fmt.Errorf("payload: %w", err)
	}
	return seq, f, nil
}

// fpmConn is one connection to the publisher: its SUB socket and the
// messages (or the error that ended it) its reader goroutine received.
type fpmConn struct {
	sub    zmq4.Socket
	msgs   chan fpmRecv
	cancel context.CancelFunc
}

type fpmRecv struct {
	msg zmq4.Msg
	err error
}

// dialFPM subscribes (every topic) to endpoint, retrying the dial retries
// times 100 ms apart, and starts the reader: Recv blocks until a message
// arrives or the socket ends, so it runs on its own goroutine.
func dialFPM(ctx context.Context, endpoint string, retries int) (*fpmConn, error) {
	const retry = 100 * time.Millisecond
	cctx, cancel := context.WithCancel(ctx)
	sub := zmq4.NewSub(cctx, zmq4.WithDialerRetry(retry), zmq4.WithDialerMaxRetries(retries), zmq4.WithLogger(log.New(io.Discard, "", 0)))
	err := sub.Dial(endpoint)
	if err == nil {
		err = sub.SetOption(zmq4.OptionSubscribe, "")
	}
	if err != nil {
		sub.Close()
		cancel()
		return nil, err
	}
	c := &fpmConn{sub: sub, msgs: make(chan fpmRecv, 256), cancel: cancel}
	go func() {
		defer close(c.msgs)
		for {
			msg, err := sub.Recv()
			if cctx.Err() != nil {
				return
			}
			select {
			case c.msgs <- fpmRecv{msg, err}:
			case <-cctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return c, nil
}

func (c *fpmConn) close() {
	c.cancel()
	c.sub.Close()
}

// redial waits opts.Reconnect, then dials endpoint once, doubling the wait
// after each failed attempt up to opts.ReconnectMax, until a dial succeeds
// or ctx ends. It returns the connection and the attempts it took.
func redial(ctx context.Context, endpoint string, opts *FPMOptions) (*fpmConn, int, error) {
	wait := opts.Reconnect
	for attempt := 1; ; attempt++ {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, attempt - 1, ctx.Err()
		case <-t.C:
		}
		c, err := dialFPM(ctx, endpoint, 0)
		if err == nil {
			return c, attempt, nil
		}
		wait = min(2*wait, opts.ReconnectMax)
		opts.logf("reconnecting to %s: attempt %d failed (%v); next in %s", endpoint, attempt, err, wait)
	}
}

// SubscribeFPM subscribes (ZMQ SUB, every topic) to a live Dynamo
// ForwardPassMetrics publisher at endpoint (tcp://HOST:PORT; Dynamo binds
// tcp://*:20380+dp_rank in the engine process) and writes one steps row
// per message as it arrives into the dataset dir: role production, kind
// from the composition, wall_time_ns from wall_time, worker_id and dp_rank
// from the message, step_id = counter_id, and every timing window the
// message does not carry unknown (-1).
//
// Idle heartbeats are counted and skipped; holes in the 8-byte sequence
// and in counter_id are counted and listed (FPMResult.Gaps and the
// manifest's notes): the publisher drops messages when its queue is full,
// and a SUB socket drops them when the subscriber falls behind. Malformed
// messages are counted and skipped.
//
// The rows received are made durable every opts.CheckpointEvery, and at
// once when the publisher goes away (its process exits, the connection
// drops). Then, unless opts.Reconnect is 0, it re-dials with exponential
// backoff (opts.Reconnect doubling up to opts.ReconnectMax) until the
// publisher is back, and logs how many messages the sequence says were
// missed meanwhile. With opts.Reconnect 0 the publisher going away ends the
// subscription (FPMStopPublisherGone). It stops after opts.Duration or
// opts.MaxSteps, or when ctx ends (the CLI cancels it on SIGINT and
// SIGTERM); each of these finishes the dataset cleanly, as complete. An
// endpoint that cannot be reached at the start is an error before any
// dataset is created.
func SubscribeFPM(ctx context.Context, endpoint, dir string, opts FPMOptions) (*FPMResult, error) {
	opts.defaults()
	runCtx, cancel := context.WithCancel(ctx)
	if opts.Duration > 0 {
		runCtx, cancel = context.WithTimeout(ctx, opts.Duration)
	}
	defer cancel()
	conn, err := dialFPM(runCtx, endpoint, int(opts.DialTimeout/(100*time.Millisecond)))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("subscribing to %s: %w", endpoint, err)
	}
	sub := &fpmSubscription{ctx: ctx, run: runCtx, endpoint: endpoint, opts: &opts, conn: conn}
	defer func() {
		if sub.conn != nil {
			sub.conn.close()
		}
	}()

	start := time.Now()
	m := datasets.Manifest{
		Created: start.UTC().Format(time.RFC3339),
		Tool:    datasets.Tool{Name: "steplab", Version: "dev", Command: opts.Command},
		Source: datasets.Source{Kind: "capture", Format: "dynamo-fpm-zmq", Path: endpoint,
			Detail: map[string]string{"endpoint": endpoint}},
		MeasurementPolicy: &datasets.MeasurementPolicy{Decode: datasets.PolicyProduction, Prefill: datasets.PolicyProduction},
	}
	w, err := datasets.Create(dir, m, datasets.CreateOptions{Overwrite: opts.Overwrite})
	if err != nil {
		return nil, err
	}
	tw, err := datasets.NewTableWriter[datasets.Step](w, datasets.TableSteps, datasets.TableOptions{RowGroupRows: 4096, PartRows: 1 << 20})
	if err != nil {
		_ = w.Abort(err.Error())
		return nil, err
	}
	res := &FPMResult{Dataset: dir, Endpoint: endpoint}
	st := &fpmState{res: res, maxRanges: opts.maxGapRanges, counter: map[fpmKey]int64{}, stepID: map[fpmKey]int64{}}
	sub.tw, sub.st = tw, st
	err = sub.loop()
	res.ElapsedS = time.Since(start).Seconds()
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = w.UpdateManifest(func(m *datasets.Manifest) {
			for k, v := range fpmDetail(res) {
				m.Source.Detail[k] = v
			}
			m.Notes = append(m.Notes, fpmNotes(res, st.renumb)...)
		})
	}
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		cancel()
		_ = w.Abort(err.Error())
		res.Status = datasets.DatasetPartial
		return res, err
	}
	res.Status = datasets.DatasetComplete
	return res, nil
}

func (o *FPMOptions) defaults() {
	if o.CheckpointEvery <= 0 {
		o.CheckpointEvery = 5 * time.Second
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	if o.maxGapRanges <= 0 {
		o.maxGapRanges = 1000
	}
	if o.ReconnectMax < o.Reconnect {
		o.ReconnectMax = o.Reconnect
	}
}

func (o *FPMOptions) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
	}
}

// fpmSubscription is the state of SubscribeFPM's receive loop.
type fpmSubscription struct {
	ctx, run context.Context // the caller's; the caller's bounded by Duration
	endpoint string
	opts     *FPMOptions
	tw       *datasets.TableWriter[datasets.Step]
	st       *fpmState
	conn     *fpmConn
	// rejoined: the first message since a reconnection has yet to come,
	// which tells from its sequence how many were missed.
	rejoined bool
}

// loop receives until a stop: nil with res.StopReason set, or the error
// that ends the subscription.
func (s *fpmSubscription) loop() error {
	res := s.st.res
	ckpt := time.NewTicker(s.opts.CheckpointEvery)
	defer ckpt.Stop()
	for {
		select {
		case <-s.run.Done():
			s.stopped()
			return nil
		case <-ckpt.C:
			if err := s.tw.Checkpoint(); err != nil {
				return err
			}
		case r, ok := <-s.conn.msgs:
			if s.run.Err() != nil {
				s.stopped()
				return nil
			}
			if !ok || r.err != nil {
				if done, err := s.lost(r.err); done || err != nil {
					return err
				}
				continue
			}
			if err := s.message(r.msg.Frames); err != nil {
				return err
			}
			if s.opts.MaxSteps > 0 && res.Steps >= s.opts.MaxSteps {
				res.StopReason = FPMStopMaxSteps
				return nil
			}
		}
	}
}

// stopped records why the run context ended.
func (s *fpmSubscription) stopped() {
	s.st.res.StopReason = FPMStopDuration
	if s.ctx.Err() != nil {
		s.st.res.StopReason = FPMStopCanceled
	}
}

// lost handles the publisher going away: the rows so far are made durable
// (a part), then the subscription reconnects, or ends where reconnecting is
// off or the run ends while waiting (done).
func (s *fpmSubscription) lost(cause error) (done bool, err error) {
	res := s.st.res
	if cause == nil {
		cause = errors.New("subscriber closed")
	}
	if err := s.tw.Checkpoint(); err != nil {
		return true, err
	}
	res.Disconnects++
	s.conn.close()
	s.conn = nil
	if s.opts.Reconnect <= 0 {
		s.opts.logf("publisher at %s went away (%v) after %d messages; %d steps are durable; not reconnecting (--reconnect 0)", s.endpoint, cause, res.Messages, res.Steps)
		res.StopReason = FPMStopPublisherGone
		return true, nil
	}
	s.opts.logf("publisher at %s went away (%v) after %d messages; %d steps are durable; reconnecting in %s (backoff up to %s)",
		s.endpoint, cause, res.Messages, res.Steps, s.opts.Reconnect, s.opts.ReconnectMax)
	conn, attempts, err := redial(s.run, s.endpoint, s.opts)
	if err != nil { // the run ended while waiting
		s.stopped()
		return true, nil
	}
	s.conn, s.rejoined = conn, true
	res.Reconnects++
	s.opts.logf("reconnected to %s after %d attempts", s.endpoint, attempts)
	return false, nil
}

// message accounts for and writes one message.
func (s *fpmSubscription) message(frames [][]byte) error {
	res, st := s.st.res, s.st
	res.Messages++
	seq, f, err := parseFPMMessage(frames)
	if len(frames) == 3 && len(frames[1]) == 8 {
		if s.rejoined {
			s.rejoined = false
			switch {
			case !st.haveSeq:
			case seq > st.lastSeq+1:
				s.opts.logf("after reconnecting: %d messages missed while away (sequence %d..%d)", seq-st.lastSeq-1, st.lastSeq+1, seq-1)
			case seq == st.lastSeq+1:
				s.opts.logf("after reconnecting: no messages missed (sequence continues at %d)", seq)
			default:
				s.opts.logf("after reconnecting: the sequence restarted at %d (was %d): the publisher restarted, and what it sent while away cannot be counted", seq, st.lastSeq)
			}
		}
		st.observeSeq(seq)
	}
	if err != nil {
		res.Malformed++
		if res.FirstMalformed == "" {
			res.FirstMalformed = fmt.Sprintf("message %d: %v", res.Messages, err)
		}
		return nil
	}
	st.observeCounter(f)
	switch {
	case f.IsHeartbeat():
		res.Heartbeats++
	case f.IsEmpty():
		res.Empty++
	default:
		if err := s.tw.Append(st.step(f)); err != nil {
			return err
		}
		res.Steps++
	}
	if s.opts.Progress != nil {
		s.opts.Progress(*res)
	}
	return nil
}

func fpmDetail(r *FPMResult) map[string]string {
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	return map[string]string{
		"messages": i(r.Messages), "steps": i(r.Steps), "heartbeats": i(r.Heartbeats), "empty": i(r.Empty),
		"malformed": i(r.Malformed), "sequence_gaps": i(r.SequenceGaps), "sequence_missing": i(r.SequenceMissing),
		"counter_gaps": i(r.CounterGaps), "counter_missing": i(r.CounterMissing), "restarts": i(r.Restarts),
		"disconnects": i(r.Disconnects), "reconnects": i(r.Reconnects),
		"stop_reason": r.StopReason, "elapsed_s": strconv.FormatFloat(r.ElapsedS, 'f', 3, 64),
	}
}

// maxGapNotes bounds the gap ranges spelled out in the manifest's notes.
const maxGapNotes = 20

func fpmNotes(r *FPMResult, renumbered int64) []string {
	notes := []string{
		"dynamo-fpm live stream: one row per ForwardPassMetrics message as it arrived; step_id = counter_id; " +
			"wall_time_ns from wall_time (s); the other timing windows, payload sizes and new/cached counts are unknown (-1); " +
			"num_waiting = queued prefill + queued decode requests",
		fmt.Sprintf("received %d messages: %d steps written, %d idle heartbeats and %d empty messages skipped, %d malformed skipped; stopped by %s after %.1f s",
			r.Messages, r.Steps, r.Heartbeats, r.Empty, r.Malformed, r.StopReason, r.ElapsedS),
	}
	if r.FirstMalformed != "" {
		notes = append(notes, "first malformed message: "+r.FirstMalformed)
	}
	if r.SequenceGaps > 0 || r.CounterGaps > 0 {
		notes = append(notes, fmt.Sprintf("gaps: %d in the sequence (%d messages missing), %d in counter_id (%d steps missing); "+
			"the publisher drops messages when its queue is full, a subscriber that falls behind loses them too",
			r.SequenceGaps, r.SequenceMissing, r.CounterGaps, r.CounterMissing))
		for i, g := range r.Gaps {
			if i == maxGapNotes {
				notes = append(notes, fmt.Sprintf("gap: ... %d more ranges (see the summary)", len(r.Gaps)-maxGapNotes))
				break
			}
			notes = append(notes, "gap: "+g.String())
		}
	} else {
		notes = append(notes, "gaps: none in the sequence or counter_id")
	}
	if r.Restarts > 0 {
		notes = append(notes, fmt.Sprintf("the sequence or counter_id went backwards %d times (publisher restarted?)", r.Restarts))
	}
	if r.Disconnects > 0 {
		notes = append(notes, fmt.Sprintf("the publisher went away %d times and was reconnected %d times; the rows were made durable at each loss; "+
			"what it sent meanwhile is in the sequence gaps above (a restarted publisher's cannot be counted)", r.Disconnects, r.Reconnects))
	}
	if renumbered > 0 {
		notes = append(notes, fmt.Sprintf("%d steps had no usable counter_id (0 or not increasing) and were numbered after the previous step", renumbered))
	}
	return notes
}
