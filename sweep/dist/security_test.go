package dist

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/sweep"
)

// syncBuffer is a log sink safe for the worker's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func logTo(b *syncBuffer) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// TestForgedUnsignedAndForeignTasksRefused: an intruder who may publish
// on the task subjects (but not write the sweeps' keys) publishes, before
// the sweep's own tasks, an unsigned task and a task with a forged
// signature, both for point 1 with 30 requests instead of 60, and a
// genuinely signed task of another sweep. The worker refuses all three
// (terminated, one log line each), and the merged sweep is the local one.
func TestForgedUnsignedAndForeignTasksRefused(t *testing.T) {
	spec := smallSpec(t, sweep.Vary{Key: "load.rate_rps", Values: []string{"25", "50"}})
	want := localOutputs(t, spec)
	s := startServer(t)
	results := t.TempDir()
	var log syncBuffer
	w := startWorker(t, s, WorkerOptions{Results: results, Name: "w0", Log: logTo(&log)})

	// Another sweep, run first: the intruder copies one of its signed tasks.
	other := smallSpec(t, sweep.Vary{Key: "load.rate_rps", Values: []string{"75"}})
	nc, ijs := connectAs(t, s, intruderUser)
	copied := make(chan *nats.Msg, 1)
	sub, err := nc.Subscribe(SubjectPrefix+">", func(m *nats.Msg) {
		select {
		case copied <- m:
		default:
		}
	})
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	_, _, err = submit(t, s, other, SubmitOptions{Results: results, SweepID: "other"})
	require.NoError(t, err)
	require.NoError(t, sub.Unsubscribe())
	foreign := <-copied

	forge := func(subject string) {
		tasks, err := Plan(spec, spec.ID(), "")
		require.NoError(t, err)
		f := tasks[1]
		f.Spec.Sets = append(f.Spec.Sets, "load.requests=30")
		b, err := json.Marshal(f)
		require.NoError(t, err)
		ctx := context.Background()
		_, err = ijs.Publish(ctx, subject, b) // unsigned
		require.NoError(t, err)
		_, key, _ := ed25519.GenerateKey(rand.Reader)
		m := nats.NewMsg(subject)
		m.Data, m.Header = b, nats.Header{SigHeader: {base64.StdEncoding.EncodeToString(ed25519.Sign(key, b))}}
		_, err = ijs.PublishMsg(ctx, m) // forged
		require.NoError(t, err)
		m = nats.NewMsg(subject)
		m.Data, m.Header = foreign.Data, foreign.Header
		m.Header.Del(jetstream.MsgIDHeader) // a new message, not a duplicate
		_, err = ijs.PublishMsg(ctx, m)     // another sweep's
		require.NoError(t, err)
	}
	r, out, err := submit(t, s, spec, SubmitOptions{Results: results, beforePublish: func(_, subject string) { forge(subject) }})
	require.NoError(t, err)
	assert.Len(t, out.Done, 2)
	assertSameOutputs(t, want, r)
	w.stop()
	assert.EqualValues(t, 3, w.stats.Refused)
	lines := log.String()
	for _, reason := range []string{"unsigned task on " + SubjectPrefix, "its signature does not verify with sweep " + spec.ID() + "'s key (forged or altered)"} {
		assert.Contains(t, lines, reason)
	}
	assert.Equal(t, 2, strings.Count(lines, "forged or altered"), "the forged task and the other sweep's")
	assert.Equal(t, 3, strings.Count(lines, `msg="refused task"`))
}

// TestWorkerRoleCannotPublishOrRekey: with the example's permissions a
// worker can neither publish a task nor overwrite a sweep's key, nor
// delete the stream.
func TestWorkerRoleCannotPublishOrRekey(t *testing.T) {
	spec := smallSpec(t, sweep.Vary{Key: "load.rate_rps", Values: []string{"25"}})
	s := startServer(t)
	results := t.TempDir()
	startWorker(t, s, WorkerOptions{Results: results})
	_, _, err := submit(t, s, spec, SubmitOptions{Results: results})
	require.NoError(t, err)
	store, err := StoreID(results)
	require.NoError(t, err)
	violations := make(chan error, 8)
	pw := filepath.Join(t.TempDir(), "pw")
	require.NoError(t, os.WriteFile(pw, []byte(testPasswords[workerUser]), 0o600))
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(workerUser, testPasswords[workerUser]),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
	require.NoError(t, err)
	defer nc.Close()
	for _, subject := range []string{Subject(store, spec.ID()), "$KV." + SweepsBucket + "." + spec.ID(),
		"$JS.API.STREAM.DELETE." + StreamName} {
		require.NoError(t, nc.Publish(subject, []byte("{}")))
		require.NoError(t, nc.Flush())
		select {
		case err := <-violations:
			assert.ErrorIs(t, err, nats.ErrPermissionViolation, subject)
		case <-time.After(patience):
			t.Fatalf("no permission violation for %s", subject)
		}
	}
}

// TestPoolsTakeOnlyTheirStoresTasks: two worker pools with different
// results directories; a sweep for one is run by it alone, and the other
// says it is not taking it.
func TestPoolsTakeOnlyTheirStoresTasks(t *testing.T) {
	spec := smallSpec(t)
	want := localOutputs(t, spec)
	s := startServer(t)
	mine, theirs := t.TempDir(), t.TempDir()
	var log syncBuffer
	a := startWorker(t, s, WorkerOptions{Results: mine, Name: "a"})
	b := startWorker(t, s, WorkerOptions{Results: theirs, Name: "b", Log: logTo(&log)})
	// b's store needs a consumer of its own before it listens: another
	// sweep, for b, makes it.
	_, _, err := submit(t, s, smallSpec(t, sweep.Vary{Key: "load.rate_rps", Values: []string{"25"}}),
		SubmitOptions{Results: theirs, SweepID: "theirs"})
	require.NoError(t, err)
	r, out, err := submit(t, s, spec, SubmitOptions{Results: mine})
	require.NoError(t, err)
	assert.Len(t, out.Done, 8)
	assertSameOutputs(t, want, r)
	require.Eventually(t, func() bool { return strings.Contains(log.String(), "sweep="+spec.ID()) }, patience, 10*time.Millisecond)
	a.stop()
	b.stop()
	assert.EqualValues(t, 8, a.stats.Done)
	assert.EqualValues(t, 1, b.stats.Done, "b ran only its own sweep")
	assert.Contains(t, log.String(), `msg="not taking sweep: its parts go to another results store" sweep=`+spec.ID())
	parts, err := PartsIn(theirs)
	require.NoError(t, err)
	assert.Empty(t, parts[spec.ID()])
}

// TestMergeRefusesPartsFromOtherInputs: a part of the right name but run
// from other inputs (300 requests instead of 60) is refused by the merge,
// and the submitter waits for the point's own part instead of counting it.
func TestMergeRefusesPartsFromOtherInputs(t *testing.T) {
	spec := smallSpec(t, sweep.Vary{Key: "load.rate_rps", Values: []string{"25", "50"}})
	want := localOutputs(t, spec)
	forged := spec
	forged.Sets = append(append([]string(nil), spec.Sets...), "load.requests=300")
	dir := t.TempDir()
	_, err := RunPoint(forged, spec.ID(), 1, dir)
	require.NoError(t, err)
	_, err = RunPoint(spec, spec.ID(), 0, dir)
	require.NoError(t, err)
	tasks, err := Plan(spec, spec.ID(), "")
	require.NoError(t, err)
	digests := map[int]string{0: tasks[0].Digest(), 1: tasks[1].Digest()}
	_, err = Merge(dir, spec.ID(), digests)
	var de *DigestError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, 1, de.Index)
	assert.ErrorContains(t, err, "point 1 was run from other inputs")

	// The forged part lands while the point runs: the submitter reports
	// it, and waits for the real one.
	s := startServer(t)
	results := t.TempDir()
	refused := make(chan struct{})
	var once sync.Once
	startWorker(t, s, WorkerOptions{Results: results, beforeWrite: func(task *Task) error {
		if task.Index == 1 {
			_, err := RunPoint(forged, spec.ID(), 1, results)
			require.NoError(t, err)
			select {
			case <-refused:
			case <-time.After(patience):
			}
		}
		return nil
	}})
	r, _, err := submit(t, s, spec, SubmitOptions{Results: results, Events: func(e Event) {
		if e.Event == "refused" {
			once.Do(func() { close(refused) })
		}
	}})
	require.NoError(t, err)
	select {
	case <-refused:
	default:
		t.Fatal("the forged part was not reported")
	}
	assertSameOutputs(t, want, r)
}

func TestTaskCheck(t *testing.T) {
	spec := smallSpec(t)
	tasks, err := Plan(spec, "s1", "r")
	require.NoError(t, err)
	require.NoError(t, tasks[5].Check())
	assert.Equal(t, sweep.Grid(spec.Vary)[5], gridValues(spec.Vary, 5))
	tests := []struct {
		name string
		edit func(*Task)
		want string
	}{
		{"dotdot id", func(t *Task) { t.SweepID = ".." }, `sweep id ".."`},
		{"wildcard id", func(t *Task) { t.SweepID = "a*b>c" }, `sweep id "a*b>c"`},
		{"negative index", func(t *Task) { t.Index = -5 }, "point -5 of 8"},
		{"huge index", func(t *Task) { t.Index = 1_000_000_000 }, "point 1000000000 of 8"},
		{"huge total", func(t *Task) { t.Total = 1_000_000_000 }, "its grid has 8 points"},
		{"values off the grid", func(t *Task) { t.Values = []string{"-5", "resp0"} }, "its grid says"},
		{"old protocol", func(t *Task) { t.V = 2 }, "protocol version 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			task := tasks[5]
			task.Values = append([]string(nil), task.Values...)
			tc.edit(&task)
			assert.ErrorContains(t, task.Check(), tc.want)
		})
	}
	for _, bad := range []string{"steplab.sweep.tasks.x.y", "steplab.sweep.tasks.0123456789abcdef", "steplab.sweep.tasks.0123456789abcdef.a*b", "other.0123456789abcdef.s"} {
		_, _, ok := parseSubject(bad)
		assert.False(t, ok, bad)
	}
	store, id, ok := parseSubject(Subject("0123456789abcdef", "s_1"))
	assert.True(t, ok)
	assert.Equal(t, []string{"0123456789abcdef", "s_1"}, []string{store, id})
}

// TestDeadLettersCarryNoFileContents: a task naming a file as its
// hardware spec fails on the file's contents; the dead letter names the
// key and the class of error, not the contents (the worker's log has
// them).
func TestDeadLettersCarryNoFileContents(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret.yaml")
	require.NoError(t, os.WriteFile(secret, []byte("root-SECRET-hash: 1\n"), 0o600))
	spec := smallSpec(t, sweep.Vary{Key: "load.rate_rps", Values: []string{"25"}})
	tasks, err := Plan(spec, "s", "r")
	require.NoError(t, err)
	task := tasks[0]
	task.Spec.Sets = append(task.Spec.Sets, "stages.generator.engine.hardware="+secret)
	_, err = task.Execute(0)
	require.Error(t, err)
	require.Contains(t, err.Error(), "SECRET", "the point's error quotes the file: %v", err)
	safe := SafeError(&task, err)
	assert.NotContains(t, safe, "SECRET")
	assert.Equal(t, "point 0 (load.rate_rps=25): a document it reads does not parse (key stages.generator.engine.hardware); the worker's log has the details", safe)

	tests := []struct {
		err  error
		want string
	}{
		{&os.PathError{Op: "open", Path: "/x", Err: os.ErrPermission}, "cannot open a file it names (permission denied)"},
		{errors.New("load.rate_rps is -5: root:x:0:0"), "invalid point (key load.rate_rps)"},
		{errors.New("x.yaml:3: yaml: line 1: did not find expected key root:x"), "a document it reads does not parse"},
		{&limitError{msg: "point 0: over its limit"}, "point 0: over its limit"},
		{refuse("unsigned"), "refused: unsigned"},
	}
	for _, tc := range tests {
		assert.Contains(t, SafeError(&task, tc.err), tc.want)
		assert.NotContains(t, SafeError(&task, tc.err), "root:x")
	}
}

// TestTaskLimits: a point over its request limit, and one past its wall
// time, are dead-lettered on their first delivery (no redelivery) with a
// message naming the limit; the wall-time one stops its worker.
func TestTaskLimits(t *testing.T) {
	spec := smallSpec(t, sweep.Vary{Key: "load.rate_rps", Values: []string{"25", "50"}})
	s := startServer(t)
	results := t.TempDir()
	w := startWorker(t, s, WorkerOptions{Results: results, Limits: Limits{MaxRequests: 1000}})
	_, out, err := submit(t, s, spec, SubmitOptions{Results: results, Limits: Limits{MaxRequests: 100}})
	require.ErrorIs(t, err, ErrDeadLetters)
	require.Len(t, out.Dead, 2)
	for _, d := range out.Dead {
		assert.Equal(t, 1, d.Attempts)
		assert.Contains(t, d.Error, "simulates 260 requests, over its limit of 100")
	}
	w.stop()
	assert.EqualValues(t, 2, w.stats.Dead)

	one := smallSpec(t, sweep.Vary{Key: "load.rate_rps", Values: []string{"25"}})
	w = startWorker(t, s, WorkerOptions{Results: results})
	_, out, err = submit(t, s, one, SubmitOptions{Results: results, Limits: Limits{WallTimeNs: 1}})
	require.ErrorIs(t, err, ErrDeadLetters)
	require.Len(t, out.Dead, 1)
	assert.Contains(t, out.Dead[0].Error, "exceeded its wall-time limit of 1ns")
	<-w.done
	assert.ErrorContains(t, w.err, "stopping, since the point cannot be interrupted")
	assert.Equal(t, Limits{MaxRequests: 5, WallTimeNs: 7}, Limits{MaxRequests: 9, WallTimeNs: 7}.Tighter(Limits{MaxRequests: 5}))

	// A step limit stops the point inside the simulation: dead on its
	// first delivery, and the worker goes on to the next task.
	w = startWorker(t, s, WorkerOptions{Results: results, Limits: Limits{MaxSteps: 50}})
	_, out, err = submit(t, s, one, SubmitOptions{Results: results})
	require.ErrorIs(t, err, ErrDeadLetters)
	require.Len(t, out.Dead, 1)
	assert.Equal(t, 1, out.Dead[0].Attempts)
	assert.Contains(t, out.Dead[0].Error, "exceeded its step limit of 50 steps")
	more := smallSpec(t, sweep.Vary{Key: "load.rate_rps", Values: []string{"30"}})
	_, _, err = submit(t, s, more, SubmitOptions{Results: results, Limits: Limits{MaxSteps: 1 << 40}})
	require.Error(t, err, "the worker's own limit is the tighter one")
	w.stop()
	require.NoError(t, w.err, "a step limit does not stop the worker")
	assert.EqualValues(t, 2, w.stats.Dead)
}

// TestSubmitterSaysWhoHoldsAPoint: a point held past the timeout is named
// with its worker and the time it took it.
func TestSubmitterSaysWhoHoldsAPoint(t *testing.T) {
	spec := smallSpec(t, sweep.Vary{Key: "load.rate_rps", Values: []string{"25"}})
	s := startServer(t)
	results := t.TempDir()
	release := make(chan struct{})
	startWorker(t, s, WorkerOptions{Results: results, Name: "slow-worker", beforeWrite: func(*Task) error {
		<-release
		return errors.New("stopped")
	}})
	defer close(release)
	var held, pending []Event
	_, out, err := submit(t, s, spec, SubmitOptions{Results: results, Timeout: 2 * time.Second, Report: 100 * time.Millisecond,
		Events: func(e Event) {
			switch e.Event {
			case "held":
				held = append(held, e)
			case "pending":
				pending = append(pending, e)
			}
		}})
	require.ErrorContains(t, err, "point 0 held by slow-worker since ")
	assert.Equal(t, []int{0}, out.Pending)
	require.NotEmpty(t, held)
	assert.Equal(t, "slow-worker", held[0].Worker)
	_, err = time.Parse(time.RFC3339, held[0].Since)
	assert.NoError(t, err)
	// While it waits, the submitter names the point held longest.
	require.NotEmpty(t, pending)
	last := pending[len(pending)-1]
	require.NotNil(t, last.Index)
	assert.Equal(t, []any{0, "slow-worker", held[0].Since}, []any{*last.Index, last.Worker, last.Since})
	assert.Equal(t, "1 points pending, 1 of them held by a worker", last.Error)
}

// FuzzVerifyParsers: any subject and any task bytes are split or refused,
// never a panic; a task that passes its check names a point of its grid.
func FuzzVerifyParsers(f *testing.F) {
	tasks, err := Plan(smallSpec(f), "s1", "r")
	require.NoError(f, err)
	good, err := json.Marshal(tasks[3])
	require.NoError(f, err)
	f.Add(Subject("0123456789abcdef", "s1"), good)
	f.Add("steplab.sweep.tasks.x.a*b>c", []byte(`{"v":3,"index":-5,"total":1000000000}`))
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		if store, id, ok := parseSubject(subject); ok {
			assert.Equal(t, subject, Subject(store, id))
		}
		var task Task
		if json.Unmarshal(data, &task) != nil || task.Check() != nil {
			return
		}
		assert.GreaterOrEqual(t, task.Index, 0)
		assert.Less(t, task.Index, task.Total)
		assert.LessOrEqual(t, task.Total, MaxPoints)
		assert.Equal(t, sweep.Grid(task.Spec.Vary)[task.Index], task.Values)
	})
}
