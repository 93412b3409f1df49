package capture

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/importers"
	"github.com/steplab/steplab/datasets/validate"
)

// fpmPublisher is an in-process stand-in for Dynamo's _FpmPublisherThread:
// a ZMQ PUB socket on 127.0.0.1 (a free port) sending multipart messages
// (empty topic, 8-byte big-endian sequence, msgpack ForwardPassMetrics).
type fpmPublisher struct {
	t    *testing.T
	pub  zmq4.Socket
	addr string
}

func newFPMPublisher(t *testing.T) *fpmPublisher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pub := zmq4.NewPub(ctx, zmq4.WithLogger(log.New(io.Discard, "", 0)))
	require.NoError(t, pub.Listen("tcp://127.0.0.1:0"))
	t.Cleanup(func() { pub.Close(); cancel() })
	port := pub.Addr().(*net.TCPAddr).Port
	return &fpmPublisher{t: t, pub: pub, addr: "tcp://127.0.0.1:" + strconv.Itoa(port)}
}

// waitSubscribed waits until a subscriber has subscribed: a PUB socket
// drops what it sends before that (ZMQ's slow-joiner).
func (p *fpmPublisher) waitSubscribed() {
	p.t.Helper()
	require.Eventually(p.t, func() bool {
		for _, topic := range p.pub.(zmq4.Topics).Topics() {
			if topic == "" {
				return true
			}
		}
		return false
	}, patience, 5*time.Millisecond, "no subscriber subscribed")
}

func (p *fpmPublisher) send(seq uint64, f importers.FPM) {
	p.sendFrames([]byte{}, seqFrame(seq), importers.EncodeFPM(f))
}

func (p *fpmPublisher) sendFrames(frames ...[]byte) {
	p.t.Helper()
	require.NoError(p.t, p.pub.SendMulti(zmq4.NewMsgFrom(frames...)))
}

func seqFrame(seq uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seq)
	return b[:]
}

func fpmStep(counter int64, wall float64, prefill, decode int64) importers.FPM {
	f := importers.FPM{Version: 1, WorkerID: "w-7", DPRank: 1, CounterID: counter, WallTime: wall}
	f.Scheduled.NumPrefillRequests = prefill
	if prefill > 0 {
		f.Scheduled.SumPrefillTokens = 256 * prefill
		f.Scheduled.VarPrefillLength = 4
	}
	f.Scheduled.NumDecodeRequests = decode
	f.Scheduled.SumDecodeKVTokens = 300 * decode
	f.Queued.NumPrefillRequests = 2
	f.Queued.NumDecodeRequests = 1
	return f
}

func heartbeat() importers.FPM { return importers.FPM{Version: 1, WorkerID: "w-7", DPRank: 1} }

// subscribe runs SubscribeFPM on its own goroutine.
func subscribe(ctx context.Context, endpoint, dir string, opts FPMOptions) func() (*FPMResult, error) {
	var res *FPMResult
	var err error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		res, err = SubscribeFPM(ctx, endpoint, dir, opts)
	}()
	return func() (*FPMResult, error) { wg.Wait(); return res, err }
}

func readSteps(t *testing.T, dir string) []datasets.Step {
	t.Helper()
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	rows, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
	require.NoError(t, err)
	return rows
}

// TestSubscribeFPM sends a stream with heartbeats, a malformed message and a
// deliberate hole (sequence 5..6 and counter_id 4..5 never sent) and checks
// the rows written and the gap report.
func TestSubscribeFPM(t *testing.T) {
	p := newFPMPublisher(t)
	dir := filepath.Join(t.TempDir(), "fpm")
	wait := subscribe(context.Background(), p.addr, dir, FPMOptions{MaxSteps: 5, Duration: patience})
	p.waitSubscribed()

	p.send(10, heartbeat())                 // joined late: the first sequence is not 0
	p.send(11, fpmStep(1, 0.0125, 1, 0))    // prefill
	p.send(12, fpmStep(2, 0.0040, 0, 1))    // decode
	p.send(13, fpmStep(3, 0.0200, 2, 3))    // mixed
	p.sendFrames([]byte{}, []byte("short")) // malformed: two frames
	p.send(15, heartbeat())                 // idle
	empty := fpmStep(0, 0.001, 0, 0)        // wall time, nothing scheduled
	p.send(16, empty)                       //
	p.send(19, fpmStep(6, 0.0050, 0, 4))    // 17..18 and counter 4..5 lost
	p.send(20, fpmStep(7, 0.0051, 0, 4))    // the 5th step: stop
	p.send(21, fpmStep(8, 0.0052, 0, 4))    // after the stop: not written

	res, err := wait()
	require.NoError(t, err)
	assert.Equal(t, FPMStopMaxSteps, res.StopReason)
	assert.Equal(t, datasets.DatasetComplete, res.Status)
	assert.EqualValues(t, 5, res.Steps)
	assert.EqualValues(t, 2, res.Heartbeats)
	assert.EqualValues(t, 1, res.Empty)
	assert.EqualValues(t, 1, res.Malformed)
	assert.Contains(t, res.FirstMalformed, "2 frames")
	assert.EqualValues(t, 9, res.Messages)
	// The malformed message carried no sequence: 14 is lost with 17 and 18.
	assert.EqualValues(t, 2, res.SequenceGaps)
	assert.EqualValues(t, 3, res.SequenceMissing)
	assert.EqualValues(t, 1, res.CounterGaps)
	assert.EqualValues(t, 2, res.CounterMissing)
	assert.Zero(t, res.Restarts)
	assert.Equal(t, []FPMGap{
		{Field: "sequence", From: 14, To: 14},
		{Field: "sequence", From: 17, To: 18},
		{Field: "counter_id", WorkerID: "w-7", DPRank: 1, From: 4, To: 5},
	}, res.Gaps)
	assert.Equal(t, []string{"w-7/1"}, res.Workers)

	steps := readSteps(t, dir)
	require.Len(t, steps, 5)
	want := []struct {
		id     int64
		kind   string
		wallNs int64
	}{
		{1, datasets.KindPrefill, 12_500_000},
		{2, datasets.KindDecode, 4_000_000},
		{3, datasets.KindMixed, 20_000_000},
		{6, datasets.KindDecode, 5_000_000},
		{7, datasets.KindDecode, 5_100_000},
	}
	for i, w := range want {
		s := steps[i]
		assert.Equal(t, w.id, s.StepID, "row %d", i)
		assert.Equal(t, w.kind, s.Kind, "row %d", i)
		assert.InDelta(t, w.wallNs, s.WallTimeNs, 1, "row %d", i)
		assert.Equal(t, "w-7", s.WorkerID)
		assert.EqualValues(t, 1, s.DPRank)
		assert.Equal(t, datasets.RoleProduction, s.Role)
		assert.True(t, s.Valid)
		assert.EqualValues(t, -1, s.BenchmarkID)
		assert.EqualValues(t, 3, s.NumWaiting)
		for name, v := range map[string]int64{"t_schedule_start": s.TScheduleStart, "t_output": s.TOutput,
			"t_update_end": s.TUpdateEnd, "narrow_time_ns": s.NarrowTimeNs, "gpu_time_ns": s.GPUTimeNs, "payload_bytes": s.PayloadBytes} {
			assert.Equal(t, datasets.Unknown, v, "row %d: %s is not carried by an FPM", i, name)
		}
	}
	assert.EqualValues(t, 512, steps[2].SumPrefillTokens)
	assert.EqualValues(t, 900, steps[2].SumDecodeKVTokens)

	m, err := datasets.ReadManifest(dir)
	require.NoError(t, err)
	assert.Equal(t, datasets.DatasetComplete, m.Status)
	assert.Equal(t, "capture", m.Source.Kind)
	assert.Equal(t, "dynamo-fpm-zmq", m.Source.Format)
	assert.Equal(t, p.addr, m.Source.Detail["endpoint"])
	assert.Equal(t, "2", m.Source.Detail["heartbeats"])
	assert.Equal(t, "2", m.Source.Detail["sequence_gaps"])
	notes := strings.Join(m.Notes, "\n")
	assert.Contains(t, notes, "gaps: 2 in the sequence (3 messages missing), 1 in counter_id (2 steps missing)")
	assert.Contains(t, notes, "gap: sequence 17..18 (2 missing)")
	assert.Contains(t, notes, `gap: counter_id 4..5 of worker "w-7" dp_rank 1 (2 missing)`)
	assert.Contains(t, notes, "2 idle heartbeats")

	rep, err := validate.Dataset(dir, validate.Options{})
	require.NoError(t, err)
	assert.Zero(t, rep.Errors, "%v", rep.Violations)
	assert.False(t, rep.Partial)
}

// TestSubscribeFPMStops covers every way a subscription ends: each one
// finishes the dataset as complete with what arrived.
func TestSubscribeFPMStops(t *testing.T) {
	tests := []struct {
		name   string
		opts   FPMOptions
		cancel bool
		reason string
	}{
		{"duration", FPMOptions{Duration: 400 * time.Millisecond}, false, FPMStopDuration},
		{"signal", FPMOptions{}, true, FPMStopCanceled},
		{"max steps", FPMOptions{MaxSteps: 3}, false, FPMStopMaxSteps},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newFPMPublisher(t)
			dir := filepath.Join(t.TempDir(), "fpm")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			wait := subscribe(ctx, p.addr, dir, tc.opts)
			p.waitSubscribed()
			for i := int64(1); i <= 3; i++ {
				p.send(uint64(i), fpmStep(i, 0.01, 0, 2))
			}
			if tc.cancel {
				// Let the three steps arrive, then interrupt.
				require.Eventually(t, func() bool {
					m, err := datasets.ReadManifest(dir)
					return err == nil && m != nil
				}, patience, 5*time.Millisecond)
				time.Sleep(200 * time.Millisecond)
				cancel()
			}
			res, err := wait()
			require.NoError(t, err)
			assert.Equal(t, tc.reason, res.StopReason)
			assert.EqualValues(t, 3, res.Steps)
			assert.Len(t, readSteps(t, dir), 3)
			m, err := datasets.ReadManifest(dir)
			require.NoError(t, err)
			assert.Equal(t, datasets.DatasetComplete, m.Status)
			assert.Contains(t, strings.Join(m.Notes, "\n"), "gaps: none")
		})
	}
}

// TestSubscribeFPMCheckpoints: while the subscription runs, the rows
// received so far are durable parts of a dataset marked partial, so a
// subscriber killed without warning keeps them.
func TestSubscribeFPMCheckpoints(t *testing.T) {
	p := newFPMPublisher(t)
	dir := filepath.Join(t.TempDir(), "fpm")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := subscribe(ctx, p.addr, dir, FPMOptions{CheckpointEvery: 50 * time.Millisecond})
	p.waitSubscribed()
	for i := int64(1); i <= 4; i++ {
		p.send(uint64(i), fpmStep(i, 0.01, 1, 1))
	}
	require.Eventually(t, func() bool {
		m, err := datasets.ReadManifest(dir)
		return err == nil && m.Tables[datasets.TableSteps].Rows == 4
	}, patience, 10*time.Millisecond, "the rows were not checkpointed")
	m, err := datasets.ReadManifest(dir)
	require.NoError(t, err)
	assert.Equal(t, datasets.DatasetPartial, m.Status, "still running")
	rep, err := validate.Dataset(dir, validate.Options{})
	require.NoError(t, err)
	assert.Zero(t, rep.Errors, "%v", rep.Violations)
	assert.True(t, rep.Partial)
	assert.EqualValues(t, 4, rep.RowsChecked[datasets.TableSteps])

	cancel()
	res, err := wait()
	require.NoError(t, err)
	assert.Equal(t, datasets.DatasetComplete, res.Status)
}

// TestSubscribeFPMRestartAndRenumber: a publisher that restarts (sequence
// and counter_id back to the start) is noted, and step ids stay
// increasing per worker so the dataset validates.
func TestSubscribeFPMRestartAndRenumber(t *testing.T) {
	p := newFPMPublisher(t)
	dir := filepath.Join(t.TempDir(), "fpm")
	wait := subscribe(context.Background(), p.addr, dir, FPMOptions{MaxSteps: 4})
	p.waitSubscribed()
	p.send(100, fpmStep(50, 0.01, 0, 1))
	p.send(101, fpmStep(51, 0.01, 0, 1))
	p.send(0, fpmStep(1, 0.01, 0, 1)) // restarted
	p.send(1, fpmStep(2, 0.01, 0, 1))
	res, err := wait()
	require.NoError(t, err)
	assert.EqualValues(t, 2, res.Restarts, "sequence and counter_id went back")
	assert.Empty(t, res.Gaps)
	var ids []int64
	for _, s := range readSteps(t, dir) {
		ids = append(ids, s.StepID)
	}
	assert.Equal(t, []int64{50, 51, 52, 53}, ids)
	m, err := datasets.ReadManifest(dir)
	require.NoError(t, err)
	notes := strings.Join(m.Notes, "\n")
	assert.Contains(t, notes, "went backwards 2 times")
	assert.Contains(t, notes, "2 steps had no usable counter_id")
	rep, err := validate.Dataset(dir, validate.Options{})
	require.NoError(t, err)
	assert.Zero(t, rep.Errors, "%v", rep.Violations)
}

// TestSubscribeFPMUnreachable: nothing listens; the error names the
// endpoint and no dataset is created.
func TestSubscribeFPMUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := "tcp://" + l.Addr().String()
	l.Close()
	dir := filepath.Join(t.TempDir(), "fpm")
	_, err = SubscribeFPM(context.Background(), addr, dir, FPMOptions{DialTimeout: 300 * time.Millisecond})
	require.Error(t, err)
	assert.Contains(t, err.Error(), addr)
	_, statErr := os.Stat(dir)
	assert.True(t, os.IsNotExist(statErr), "no dataset for a subscription that never started")
}

func TestParseFPMMessage(t *testing.T) {
	good := importers.EncodeFPM(fpmStep(3, 0.01, 1, 0))
	tests := []struct {
		name   string
		frames [][]byte
		seq    uint64
		err    string
	}{
		{"ok", [][]byte{{}, seqFrame(42), good}, 42, ""},
		{"two frames", [][]byte{seqFrame(1), good}, 0, "2 frames"},
		{"short sequence", [][]byte{{}, {1, 2, 3}, good}, 0, "sequence frame of 3 bytes"},
		{"bad payload", [][]byte{{}, seqFrame(7), {0xc1}}, 7, "payload"},
		{"newer version", [][]byte{{}, seqFrame(8), importers.EncodeFPM(importers.FPM{Version: 2})}, 8, "version 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seq, f, err := parseFPMMessage(tc.frames)
			assert.Equal(t, tc.seq, seq)
			if tc.err == "" {
				require.NoError(t, err)
				assert.EqualValues(t, 3, f.CounterID)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

// TestSubscribeFPMDynamoBytes publishes payloads written exactly as Dynamo's
// publisher writes them (datasets/importers/testdata/dynamo_fpm_publisher.py)
// with the framing of its _FpmPublisherThread: the sequence frame is the
// counter_id it stamped, from 0, heartbeats included.
func TestSubscribeFPMDynamoBytes(t *testing.T) {
	b, err := os.ReadFile("../datasets/importers/testdata/dynamo_fpm_publisher.msgpack")
	require.NoError(t, err)
	var rank0 [][]byte
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	for {
		raw, err := dec.DecodeRaw()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		f, err := importers.DecodeFPM(raw)
		require.NoError(t, err)
		if f.DPRank == 0 && f.WorkerID == "7587891376465402128" {
			rank0 = append(rank0, raw)
		}
	}
	require.Len(t, rank0, 5, "counters 0, 1, 2, 3 (heartbeat), 5")

	p := newFPMPublisher(t)
	dir := filepath.Join(t.TempDir(), "fpm")
	wait := subscribe(context.Background(), p.addr, dir, FPMOptions{MaxSteps: 4, Duration: patience})
	p.waitSubscribed()
	for _, raw := range rank0 {
		f, err := importers.DecodeFPM(raw)
		require.NoError(t, err)
		p.sendFrames([]byte{}, seqFrame(uint64(f.CounterID)), raw)
	}
	res, err := wait()
	require.NoError(t, err)
	assert.Zero(t, res.Malformed, res.FirstMalformed)
	assert.EqualValues(t, 4, res.Steps)
	assert.EqualValues(t, 1, res.Heartbeats)
	assert.Equal(t, []FPMGap{
		{Field: "sequence", From: 4, To: 4},
		{Field: "counter_id", WorkerID: "7587891376465402128", From: 4, To: 4},
	}, res.Gaps)
	var ids []int64
	for _, s := range readSteps(t, dir) {
		ids = append(ids, s.StepID)
	}
	assert.Equal(t, []int64{0, 1, 2, 5}, ids, "step_id = counter_id, from 0")
}

// newFPMPublisherAt is newFPMPublisher on a given address: a publisher
// that comes back where the last one was.
func newFPMPublisherAt(t *testing.T, addr string) *fpmPublisher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pub := zmq4.NewPub(ctx, zmq4.WithLogger(log.New(io.Discard, "", 0)))
	require.Eventually(t, func() bool { return pub.Listen(addr) == nil }, patience, 10*time.Millisecond, "cannot listen again at %s", addr)
	t.Cleanup(func() { pub.Close(); cancel() })
	return &fpmPublisher{t: t, pub: pub, addr: addr}
}

// fpmLog collects a subscription's log lines.
type fpmLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *fpmLog) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *fpmLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// TestSubscribeFPMReconnects: the publisher exits after two steps and a
// new one comes back on the same port. The two steps are durable at once
// (a checkpoint at the loss), the subscription re-dials with backoff, and
// the log says it reconnected and what the sequence tells of the messages
// sent meanwhile: some missed, none, or not countable (a restart).
func TestSubscribeFPMReconnects(t *testing.T) {
	tests := []struct {
		name     string
		resume   uint64 // the sequence number the new publisher sends first
		missing  int64
		restarts int64
		says     string
	}{
		{"missed two", 5, 2, 0, "after reconnecting: 2 messages missed while away (sequence 3..4)"},
		{"none missed", 3, 0, 0, "after reconnecting: no messages missed (sequence continues at 3)"},
		{"publisher restarted", 0, 0, 1, "after reconnecting: the sequence restarted at 0 (was 2)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newFPMPublisher(t)
			dir := filepath.Join(t.TempDir(), "fpm")
			var logs fpmLog
			var steps atomic.Int64
			wait := subscribe(context.Background(), p.addr, dir, FPMOptions{MaxSteps: 4, Reconnect: time.Millisecond,
				ReconnectMax: 20 * time.Millisecond, CheckpointEvery: time.Hour, Logf: logs.logf,
				Progress: func(r FPMResult) { steps.Store(r.Steps) }})
			p.waitSubscribed()
			p.send(1, fpmStep(1, 0.01, 0, 1))
			p.send(2, fpmStep(2, 0.01, 0, 1))
			require.Eventually(t, func() bool { return steps.Load() == 2 }, patience, 5*time.Millisecond)
			require.NoError(t, p.pub.Close())

			// The loss checkpoints: the two rows are durable before any
			// periodic checkpoint (an hour away) could have made them so.
			require.Eventually(t, func() bool {
				m, err := datasets.ReadManifest(dir)
				return err == nil && m.Tables[datasets.TableSteps].Rows == 2
			}, patience, 5*time.Millisecond, "the rows were not made durable at the loss")

			back := newFPMPublisherAt(t, p.addr)
			back.waitSubscribed()
			back.send(tc.resume, fpmStep(int64(tc.resume), 0.01, 0, 1))
			back.send(tc.resume+1, fpmStep(int64(tc.resume)+1, 0.01, 0, 1))
			res, err := wait()
			require.NoError(t, err)
			assert.Equal(t, FPMStopMaxSteps, res.StopReason)
			assert.Equal(t, datasets.DatasetComplete, res.Status)
			assert.EqualValues(t, 4, res.Steps)
			assert.EqualValues(t, 1, res.Disconnects)
			assert.EqualValues(t, 1, res.Reconnects)
			assert.EqualValues(t, tc.missing, res.SequenceMissing)
			assert.EqualValues(t, tc.restarts > 0, res.Restarts > 0)
			log := logs.String()
			assert.Contains(t, log, "publisher at "+p.addr+" went away")
			assert.Contains(t, log, "2 steps are durable; reconnecting in 1ms (backoff up to 20ms)")
			assert.Contains(t, log, "reconnected to "+p.addr+" after ")
			assert.Contains(t, log, tc.says)
			assert.Len(t, readSteps(t, dir), 4)
			m, err := datasets.ReadManifest(dir)
			require.NoError(t, err)
			assert.Contains(t, strings.Join(m.Notes, "\n"), "the publisher went away 1 times and was reconnected 1 times")
			assert.Equal(t, "1", m.Source.Detail["reconnects"])
			rep, err := validate.Dataset(dir, validate.Options{})
			require.NoError(t, err)
			assert.Zero(t, rep.Errors, "%v", rep.Violations)
		})
	}
}

// TestSubscribeFPMPublisherGone: without reconnecting, the publisher's exit
// ends the subscription cleanly with every row received; with it, a
// publisher that never comes back is re-dialled until the caller stops the
// subscription, which then finishes cleanly too.
func TestSubscribeFPMPublisherGone(t *testing.T) {
	tests := []struct {
		name      string
		reconnect time.Duration
		reason    string
		says      string
	}{
		{"no reconnect", 0, FPMStopPublisherGone, "not reconnecting (--reconnect 0)"},
		{"never back", time.Millisecond, FPMStopCanceled, "reconnecting to "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newFPMPublisher(t)
			dir := filepath.Join(t.TempDir(), "fpm")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var logs fpmLog
			var steps atomic.Int64
			wait := subscribe(ctx, p.addr, dir, FPMOptions{Reconnect: tc.reconnect, ReconnectMax: 4 * time.Millisecond,
				CheckpointEvery: time.Hour, Logf: logs.logf, Progress: func(r FPMResult) { steps.Store(r.Steps) }})
			p.waitSubscribed()
			for i := int64(1); i <= 3; i++ {
				p.send(uint64(i), fpmStep(i, 0.01, 0, 1))
			}
			require.Eventually(t, func() bool { return steps.Load() == 3 }, patience, 5*time.Millisecond)
			require.NoError(t, p.pub.Close())
			if tc.reconnect > 0 {
				// Let a failed attempt or two be logged, then stop.
				require.Eventually(t, func() bool { return strings.Contains(logs.String(), "attempt 2 failed") }, patience, 5*time.Millisecond)
				cancel()
			}
			res, err := wait()
			require.NoError(t, err)
			assert.Equal(t, tc.reason, res.StopReason)
			assert.Equal(t, datasets.DatasetComplete, res.Status)
			assert.EqualValues(t, 1, res.Disconnects)
			assert.Zero(t, res.Reconnects)
			assert.Len(t, readSteps(t, dir), 3)
			assert.Contains(t, logs.String(), tc.says)
		})
	}
}
