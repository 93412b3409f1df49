package dist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sweep"
)

const example = "../../examples/whatif/encoder-ensemble.yaml"

// exampleConf is the committed server configuration the tests run with:
// auth on, subject permissions per role.
const exampleConf = "../../examples/nats/steplab.conf"

// Users of the test server: the example's two, and an intruder who may
// publish tasks (a permission granted too widely) but not write the
// sweeps' keys.
const (
	submitterUser = "steplab-submitter"
	workerUser    = "steplab-worker"
	intruderUser  = "intruder"
)

var testPasswords = map[string]string{submitterUser: "submitter-pw", workerUser: "worker-pw", intruderUser: "intruder-pw"}

// startServer runs an embedded JetStream server configured by the
// example's file, on a random loopback port.
func startServer(t testing.TB) *server.Server {
	t.Helper()
	t.Setenv("STEPLAB_SUBMITTER_PASSWORD", testPasswords[submitterUser])
	t.Setenv("STEPLAB_WORKER_PASSWORD", testPasswords[workerUser])
	opts, err := server.ProcessConfigFile(exampleConf)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", opts.Host, "the example listens on loopback")
	require.Len(t, opts.Users, 2)
	opts.Port, opts.StoreDir, opts.NoLog, opts.NoSigs = -1, t.TempDir(), true, true
	opts.Users = append(opts.Users, &server.User{Username: intruderUser, Password: testPasswords[intruderUser],
		Permissions: &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{SubjectPrefix + ">", "$JS.API.>"}},
			Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>", SubjectPrefix + ">"}}}})
	s, err := server.NewServer(opts)
	require.NoError(t, err)
	go s.Start()
	require.True(t, s.ReadyForConnections(patience), "nats server not ready")
	t.Cleanup(s.Shutdown)
	return s
}

// connectAs connects as user, its password read from a file.
func connectAs(t testing.TB, s *server.Server, user string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "password")
	require.NoError(t, os.WriteFile(pw, []byte(testPasswords[user]+"\n"), 0o600))
	nc, err := Connect(s.ClientURL(), "test "+user, Auth{User: user, PasswordFile: pw})
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return nc, js
}

func connect(t testing.TB, s *server.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return connectAs(t, s, submitterUser)
}

// smallSpec is the example at a small load over rates and the join's
// placement: points of a few milliseconds.
func smallSpec(t testing.TB, vary ...sweep.Vary) Spec {
	t.Helper()
	b, err := os.ReadFile(example)
	require.NoError(t, err)
	if len(vary) == 0 {
		vary = []sweep.Vary{{Key: "load.rate_rps", Values: []string{"25", "50", "150", "300"}},
			{Key: "placements.remote.response", Values: []string{"resp0", "head"}}}
	}
	return SpecFromFile(example, b, []string{"load.requests=60", "load.repetitions=2", "load.warmup_requests=5"}, vary)
}

// localOutputs runs the sweep locally and returns every output file.
func localOutputs(t testing.TB, spec Spec) map[string][]byte {
	t.Helper()
	d, err := spec.Doc()
	require.NoError(t, err)
	r, err := sweep.Run(d, spec.Vary, sweep.Options{Jobs: 2})
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, sweep.Write(dir, r))
	return readDir(t, dir)
}

// readDir reads every file under dir, by its path relative to dir.
func readDir(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	require.NoError(t, filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		out[rel] = b
		return err
	}))
	return out
}

func assertSameOutputs(t *testing.T, want map[string][]byte, r *sweep.Result) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, sweep.Write(dir, r))
	got := readDir(t, dir)
	require.Len(t, got, len(want))
	require.Contains(t, want, sweep.TableFile)
	require.Contains(t, want, sweep.JSONFile)
	for name := range want {
		assert.True(t, bytes.Equal(want[name], got[name]), "%s differs from the local sweep's", name)
	}
}

// Simulate and calibrate points run on the queue too: a task carries its
// kind, the worker dispatches on it, and the merged sweep is the local
// one.
func TestDistributedSimulateAndCalibratePoints(t *testing.T) {
	dir := t.TempDir()
	sc := scenario.Default()
	sc.Engine.AsyncScheduling = false
	sc.Workload = scenario.WorkloadSpec{Kind: "poisson", RateRPS: 8, Requests: 60,
		Prompt: scenario.LengthSpec{Kind: "fixed", Value: 600}, Output: scenario.LengthSpec{Kind: "fixed", Value: 40}}
	p, err := sc.Plan()
	require.NoError(t, err)
	_, err = scenario.Run(p, filepath.Join(dir, "run"), sim.RunOptions{})
	require.NoError(t, err)
	docs := map[string]struct {
		body string
		vary sweep.Vary
	}{
		sweep.KindSimulate: {"seed: 3\nworkload: {kind: poisson, rate_rps: 30, requests: 80, prompt: {kind: fixed, value: 500}, output: {kind: fixed, value: 50}}\n" +
			"cluster: {router: {name: least_requests}, pools: {sim: {replicas: 1}}}\n",
			sweep.Vary{Key: "cluster.pools.sim.replicas", Values: []string{"1", "2", "3"}}},
		sweep.KindCalibrate: {"datasets: [run]\nholdout: 0.3\nhost: [none]\nterms: [gemm]\nmax_evals: 12\n",
			sweep.Vary{Key: "holdout", Values: []string{"0.2", "0.4"}}},
		// A plan's candidates: each a task, merged into the plan's files
		// (plan.json, the frontier figures, the chosen launch settings).
		sweep.KindPlan: {"hardware: H100-SXM\nworkload: {kind: poisson, rate_rps: 10, requests: 40, prompt: {kind: fixed, value: 500}, output: {kind: fixed, value: 30}}\n" +
			"plan: {slo: {ttft_ms: 400, itl_ms: 30}, gpus: [{hardware: H100-SXM, count: 4, price_per_hour: 3}], rate_steps: 3}\n",
			sweep.Vary{Key: "tensor_parallel", Values: []string{"1", "2", "8"}}},
	}
	for kind, doc := range docs {
		t.Run(kind, func(t *testing.T) {
			path := filepath.Join(dir, kind+".yaml")
			require.NoError(t, os.WriteFile(path, []byte(doc.body), 0o644))
			spec := SpecFromFile(path, []byte(doc.body), nil, []sweep.Vary{doc.vary})
			want := localOutputs(t, spec)
			if kind == sweep.KindPlan {
				assert.Contains(t, want, "plan.json")
				assert.Contains(t, want, filepath.Join("chosen", "scenario.yaml"))
			}
			tasks, err := Plan(spec, "k", "r")
			require.NoError(t, err)
			assert.Equal(t, kind, tasks[0].Kind)
			s := startServer(t)
			results := t.TempDir()
			startWorker(t, s, WorkerOptions{Results: results, Name: "w0"})
			startWorker(t, s, WorkerOptions{Results: results, Name: "w1"})
			r, out, err := submit(t, s, spec, SubmitOptions{Results: results, Queue: QueueConfig{AckWait: 5 * time.Second}})
			require.NoError(t, err)
			assert.Len(t, out.Done, len(doc.vary.Values))
			assert.Equal(t, kind, r.Kind)
			assertSameOutputs(t, want, r)
		})
	}
	// A task whose document reads as another kind is refused.
	body := []byte(docs[sweep.KindSimulate].body)
	task := Task{V: ProtocolVersion, Kind: sweep.KindCalibrate, SweepID: "k", Spec: SpecFromFile(filepath.Join(dir, "s.yaml"), body, nil,
		[]sweep.Vary{docs[sweep.KindSimulate].vary}), Values: []string{"1"}, Total: 3}
	_, err = task.Execute(0)
	assert.ErrorContains(t, err, "a calibrate task whose document reads as simulate")
}

// worker runs one worker (its own connection, as a process would have)
// until the returned stop is called.
type testWorker struct {
	nc     *nats.Conn
	cancel context.CancelFunc
	done   chan struct{}
	stats  WorkerStats
	err    error
}

func startWorker(t testing.TB, s *server.Server, opts WorkerOptions) *testWorker {
	t.Helper()
	nc, js := connectAs(t, s, workerUser)
	ctx, cancel := context.WithCancel(context.Background())
	w := &testWorker{nc: nc, cancel: cancel, done: make(chan struct{})}
	if opts.FetchWait == 0 {
		opts.FetchWait = 200 * time.Millisecond
	}
	if opts.RetryDelay == 0 {
		opts.RetryDelay = 20 * time.Millisecond
	}
	go func() {
		defer close(w.done)
		w.stats, w.err = RunWorker(ctx, js, opts)
	}()
	t.Cleanup(w.stop)
	return w
}

// kill closes the worker's connection and stops it, as a killed process.
func (w *testWorker) kill() { w.nc.Close(); w.cancel() }

func (w *testWorker) stop() {
	w.cancel()
	select {
	case <-w.done:
	case <-time.After(patience):
		panic("worker did not stop")
	}
}

func submit(t testing.TB, s *server.Server, spec Spec, opts SubmitOptions) (*sweep.Result, *Outcome, error) {
	t.Helper()
	_, js := connect(t, s)
	if opts.Timeout == 0 {
		opts.Timeout = patience
	}
	if opts.Poll == 0 {
		opts.Poll = 20 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience+time.Minute)
	defer cancel()
	return Run(ctx, js, spec, opts)
}

func TestDistributedSweepIsByteIdenticalToLocal(t *testing.T) {
	spec := smallSpec(t)
	want := localOutputs(t, spec)
	for _, n := range []int{1, 4} {
		t.Run(fmt.Sprintf("workers=%d", n), func(t *testing.T) {
			s := startServer(t)
			results := t.TempDir()
			var done atomic.Int64
			for i := 0; i < n; i++ {
				startWorker(t, s, WorkerOptions{Results: results, Name: fmt.Sprint("w", i),
					OnTask: func(e TaskEvent) { done.Add(1) }})
			}
			var events []Event
			r, out, err := submit(t, s, spec, SubmitOptions{Results: results, Queue: QueueConfig{AckWait: 2 * time.Second},
				Events: func(e Event) { events = append(events, e) }})
			require.NoError(t, err)
			assert.Len(t, out.Done, 8)
			assert.Empty(t, out.Dead)
			assert.Equal(t, "submitted", events[0].Event)
			assert.Equal(t, "complete", events[len(events)-1].Event)
			assert.Equal(t, 8, events[len(events)-1].Done)
			assertSameOutputs(t, want, r)
			parts, err := PartsIn(results)
			require.NoError(t, err)
			assert.Len(t, parts[spec.ID()], 8)
			// The queue is empty: every task was acknowledged.
			_, js := connect(t, s)
			st, err := js.Stream(context.Background(), StreamName)
			require.NoError(t, err)
			info, err := st.Info(context.Background())
			require.NoError(t, err)
			assert.Zero(t, info.State.Msgs)
		})
	}
}

// TestWorkerKilledMidTask kills one worker while it runs a point (before
// its part is written) and another after its part is written but before
// the ack: both tasks are redelivered after AckWait, to other workers, and
// the merged sweep is the local one: nothing lost, nothing duplicated.
func TestWorkerKilledMidTask(t *testing.T) {
	spec := smallSpec(t)
	want := localOutputs(t, spec)
	s := startServer(t)
	results := t.TempDir()
	var mu sync.Mutex
	attempts := map[string][]string{} // task id -> outcome per attempt
	record := func(e TaskEvent) {
		mu.Lock()
		attempts[e.TaskID] = append(attempts[e.TaskID], fmt.Sprintf("%d:%s", e.Attempt, e.Outcome))
		mu.Unlock()
	}
	var killedBeforeWrite, killedBeforeAck atomic.Value
	var w0, w1 *testWorker
	ready := make(chan struct{})
	w0 = startWorker(t, s, WorkerOptions{Results: results, Name: "w0", OnTask: record,
		beforeWrite: func(task *Task) error {
			<-ready
			killedBeforeWrite.Store(task.ID())
			w0.kill()
			return errors.New("killed")
		}})
	w1 = startWorker(t, s, WorkerOptions{Results: results, Name: "w1", OnTask: record,
		beforeAck: func(task *Task) error {
			<-ready
			killedBeforeAck.Store(task.ID())
			w1.kill()
			return errors.New("killed")
		}})
	close(ready)
	// The sweep completes, and purges its queue, once every point has a
	// part. The task killed before its ack has one already, so the live
	// workers hold the point killed before its write until that task has
	// been redelivered: else the purge could beat the redelivery.
	redelivered := make(chan struct{})
	var once sync.Once
	hold := func(task *Task) error {
		if id, _ := killedBeforeAck.Load().(string); id == task.ID() {
			once.Do(func() { close(redelivered) })
		}
		if id, _ := killedBeforeWrite.Load().(string); id == task.ID() {
			select {
			case <-redelivered:
			case <-time.After(patience):
			}
		}
		return nil
	}
	for i := 2; i < 4; i++ {
		startWorker(t, s, WorkerOptions{Results: results, Name: fmt.Sprint("w", i), OnTask: record, beforeWrite: hold})
	}
	r, out, err := submit(t, s, spec, SubmitOptions{Results: results, Queue: QueueConfig{AckWait: 500 * time.Millisecond, MaxDeliver: 3}})
	require.NoError(t, err)
	assert.Len(t, out.Done, 8)
	assert.Empty(t, out.Dead)
	assertSameOutputs(t, want, r)

	// The redelivered task may still be running when the sweep completes:
	// wait for its attempt to be recorded before counting.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, a := range attempts {
			n += len(a)
		}
		return n >= 10
	}, patience, 20*time.Millisecond, "the abandoned tasks are redelivered")
	w0.stop()
	w1.stop()
	assert.EqualValues(t, 1, w0.stats.Abandoned)
	assert.EqualValues(t, 1, w1.stats.Abandoned)
	assert.Zero(t, w0.stats.Done+w1.stats.Done, "killed workers finished nothing")
	mu.Lock()
	defer mu.Unlock()
	for _, id := range []string{killedBeforeWrite.Load().(string), killedBeforeAck.Load().(string)} {
		assert.Equal(t, []string{"1:abandoned", "2:done"}, attempts[id], "task %s was redelivered once", id)
	}
	// One part per point, no temporary files left, every other task done
	// on its first delivery.
	ents, err := os.ReadDir(results)
	require.NoError(t, err)
	assert.Len(t, ents, 9, "8 parts and the store id")
	for _, e := range ents {
		if e.Name() == StoreFile {
			continue
		}
		assert.False(t, strings.HasPrefix(e.Name(), "."), "temporary file %s left", e.Name())
	}
	n := 0
	for _, a := range attempts {
		n += len(a)
	}
	assert.Equal(t, 10, n, "8 tasks, 2 of them delivered twice")
}

// TestFailingTaskIsDeadLettered publishes one point with a value that
// makes it fail: after MaxDeliver attempts it is in the dead-letter bucket
// with its error, the sweep finishes (no hang), reports it, and merges the
// other points.
func TestFailingTaskIsDeadLettered(t *testing.T) {
	spec := smallSpec(t, sweep.Vary{Key: "load.rate_rps", Values: []string{"25", "50", "75"}})
	s := startServer(t)
	results := t.TempDir()
	var attempts atomic.Int64
	for i := 0; i < 2; i++ {
		startWorker(t, s, WorkerOptions{Results: results, Name: fmt.Sprint("w", i), OnTask: func(e TaskEvent) {
			if e.Index == 1 {
				attempts.Add(1)
			}
		}})
	}
	var events []Event
	r, out, err := submit(t, s, spec, SubmitOptions{Results: results, Queue: QueueConfig{AckWait: time.Second, MaxDeliver: 3},
		Events: func(e Event) { events = append(events, e) },
		mutate: func(task *Task) {
			if task.Index == 1 { // the submitter validated the point; the worker gets load.requests=0
				task.Spec.Sets = append(slices.Clone(task.Spec.Sets), "load.requests=0")
			}
		}})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrDeadLetters)
	require.Len(t, out.Dead, 1)
	d := out.Dead[0]
	assert.Equal(t, 1, d.Index)
	assert.Equal(t, 3, d.Attempts)
	assert.Equal(t, "point 1 (load.rate_rps=50): invalid point (key load.requests); the worker's log has the details", d.Error)
	// The dead-letter record can land before the last attempt's event.
	assert.Eventually(t, func() bool { return attempts.Load() == 3 }, patience, 10*time.Millisecond,
		"bounded redelivery: MaxDeliver attempts (saw %d)", attempts.Load())
	time.Sleep(50 * time.Millisecond)
	assert.EqualValues(t, 3, attempts.Load(), "no attempt past MaxDeliver")
	assert.Equal(t, []int{0, 2}, out.Done)
	require.NotNil(t, r)
	assert.Len(t, r.Points, 2)
	var dead []Event
	for _, e := range events {
		if e.Event == "dead" {
			dead = append(dead, e)
		}
	}
	require.Len(t, dead, 1)
	assert.Contains(t, dead[0].Error, "load.requests")
	// The record is in the bucket.
	_, js := connect(t, s)
	recs, err := DeadLetters(context.Background(), js, spec.ID())
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, TaskID(spec.ID(), 1), recs[0].TaskID)
	assert.Equal(t, d.Error, recs[0].Error)
}

// TestTaskEveryHolderAbandonsIsDeadLettered: a point whose every holder
// stops before acknowledging (a worker that hangs or dies each time) is
// dead-lettered by the submitter from the server's MAX_DELIVERIES
// advisory.
func TestTaskEveryHolderAbandonsIsDeadLettered(t *testing.T) {
	spec := smallSpec(t, sweep.Vary{Key: "load.rate_rps", Values: []string{"25", "50"}})
	s := startServer(t)
	results := t.TempDir()
	startWorker(t, s, WorkerOptions{Results: results, Name: "w0",
		beforeWrite: func(task *Task) error {
			if task.Index == 0 {
				return errors.New("hung")
			}
			return nil
		}})
	_, out, err := submit(t, s, spec, SubmitOptions{Results: results, Queue: QueueConfig{AckWait: 300 * time.Millisecond, MaxDeliver: 2}})
	require.ErrorIs(t, err, ErrDeadLetters)
	require.Len(t, out.Dead, 1)
	assert.Equal(t, 0, out.Dead[0].Index)
	assert.Contains(t, out.Dead[0].Error, "no result after 2 deliveries")
	assert.Equal(t, []int{1}, out.Done)
}

// TestSubmitTimesOutWithoutWorkers: no worker, the sweep ends at its
// timeout naming the pending points, and leaves no task behind.
func TestSubmitTimesOutWithoutWorkers(t *testing.T) {
	spec := smallSpec(t, sweep.Vary{Key: "load.rate_rps", Values: []string{"25", "50"}})
	s := startServer(t)
	_, out, err := submit(t, s, spec, SubmitOptions{Results: t.TempDir(), Timeout: 300 * time.Millisecond})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "timed out")
	assert.Equal(t, []int{0, 1}, out.Pending)
	_, js := connect(t, s)
	st, err := js.Stream(context.Background(), StreamName)
	require.NoError(t, err)
	info, err := st.Info(context.Background())
	require.NoError(t, err)
	assert.Zero(t, info.State.Msgs, "the sweep's tasks are purged")
}

// TestPointsAndMergeAsAnIndexedJob runs every point on its own (as the
// pods of an Indexed Job do), once more for one point (a retried pod), and
// merges: the local sweep's outputs.
func TestPointsAndMergeAsAnIndexedJob(t *testing.T) {
	spec := smallSpec(t)
	want := localOutputs(t, spec)
	dir := t.TempDir()
	for i := 7; i >= 0; i-- {
		_, err := RunPoint(spec, "", i, dir)
		require.NoError(t, err)
	}
	m, err := Merge(dir, "", nil)
	require.NoError(t, err)
	assert.Empty(t, m.Missing)
	// A pod retried after it wrote its part rewrites the same file.
	before := readDir(t, dir)
	_, err = RunPoint(spec, "", 3, dir)
	require.NoError(t, err)
	assert.Equal(t, before, readDir(t, dir))
	assertSameOutputs(t, want, m.Result)

	_, err = RunPoint(spec, "", 8, dir)
	assert.ErrorContains(t, err, "out of range")
	require.NoError(t, os.Remove(filepath.Join(dir, PartName(spec.ID(), 5))))
	m, err = Merge(dir, "", nil)
	require.NoError(t, err)
	assert.Equal(t, []int{5}, m.Missing)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	m, err = WaitParts(ctx, dir, "", 20*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, []int{5}, m.Missing, "the wait ends at its deadline")
}

func TestEmitIndexedJob(t *testing.T) {
	spec := smallSpec(t)
	var b bytes.Buffer
	require.NoError(t, EmitIndexedJob(&b, spec, 8, "", K8sOptions{Parallelism: 3, Image: "ghcr.io/x/steplab:v1"}))
	dec := yaml.NewDecoder(&b)
	var docs []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if err != nil {
			break
		}
		docs = append(docs, d)
	}
	require.Len(t, docs, 3)
	cm, job, merge := docs[0], docs[1], docs[2]
	assert.Equal(t, "ConfigMap", cm["kind"])
	assert.Equal(t, string(spec.Scenario), cm["data"].(map[string]any)["encoder-ensemble.yaml"], "the scenario round-trips")
	js := job["spec"].(map[string]any)
	assert.Equal(t, "Indexed", js["completionMode"])
	assert.Equal(t, 8, js["completions"])
	assert.Equal(t, 3, js["parallelism"])
	c := js["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	assert.Equal(t, "ghcr.io/x/steplab:v1", c["image"])
	var args []string
	for _, a := range c["args"].([]any) {
		args = append(args, a.(string))
	}
	assert.Equal(t, []string{"sweep", "/scenario/encoder-ensemble.yaml", "--set", "load.requests=60", "--set", "load.repetitions=2",
		"--set", "load.warmup_requests=5", "--vary", "load.rate_rps=25,50,150,300", "--vary", "placements.remote.response=resp0,head",
		"--sweep-id", spec.ID(), "--point", "$(JOB_COMPLETION_INDEX)", "--results", "/results"}, args)
	mc := merge["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	assert.Contains(t, fmt.Sprint(mc["args"]), "--merge /results")
}

func TestPartNames(t *testing.T) {
	id, i, ok := parsePartName("abc_1-000042.parquet")
	assert.True(t, ok)
	assert.Equal(t, "abc_1", id)
	assert.Equal(t, 42, i)
	for _, bad := range []string{".abc-000001.parquet.tmp-1", "abc-1.parquet", "abc-000001.json", "-000001.parquet", "a.b-000001.parquet"} {
		_, _, ok := parsePartName(bad)
		assert.False(t, ok, bad)
	}
	assert.Error(t, CheckID("a.b"))
	assert.Error(t, CheckID(""))
	assert.NoError(t, CheckID("sweep_2024"))
}

// patience bounds the waits of these tests on the server and the workers:
// a guard against a hang, far beyond what a loaded machine takes, never a
// claim about speed.
const patience = 5 * time.Minute
