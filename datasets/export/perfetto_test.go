package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/steplab/steplab/datasets"
	"github.com/stretchr/testify/require"
)

// traceEvent is one Chrome trace event as the viewer reads it. ts and dur
// are json.Number so the test compares the exact decimals written.
type traceEvent struct {
	Ph   string          `json:"ph"`
	Cat  string          `json:"cat"`
	Name string          `json:"name"`
	ID   string          `json:"id"`
	PID  *int            `json:"pid"`
	TID  *int            `json:"tid"`
	TS   json.Number     `json:"ts"`
	Dur  json.Number     `json:"dur"`
	Args json.RawMessage `json:"args"`
}

type traceFile struct {
	DisplayTimeUnit string            `json:"displayTimeUnit"`
	OtherData       map[string]any    `json:"otherData"`
	TraceEvents     []json.RawMessage `json:"traceEvents"`
}

// us is the exact decimal of ns in microseconds, as the exporter writes it.
func us(ns int64) string { return string(usec(nil, ns)) }

func readTrace(t *testing.T, path string) []traceEvent {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, json.Valid(b), "trace is not valid JSON")
	var tf traceFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&tf))
	require.NotEmpty(t, tf.TraceEvents)
	evs := make([]traceEvent, len(tf.TraceEvents))
	for i, raw := range tf.TraceEvents {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		require.NoError(t, d.Decode(&evs[i]), "event %d: %s", i, raw)
		require.NotNil(t, evs[i].PID, "event %d has no pid: %s", i, raw)
		switch evs[i].Ph {
		case "X", "C", "b", "e", "n", "M":
		default:
			t.Fatalf("event %d: unexpected phase %q", i, evs[i].Ph)
		}
	}
	return evs
}

type sliceKey struct {
	step int64
	name string
}

type stepArgs struct {
	StepID int64 `json:"step_id"`
}

// checkTrace asserts that every step's phases and every request's async
// slice in the trace equal the dataset's timing fields exactly, that the
// tracks are named, and that slices on one track never overlap.
func checkTrace(t *testing.T, dir string, evs []traceEvent, returnNs int64) {
	t.Helper()
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	steps, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
	require.NoError(t, err)
	require.NotEmpty(t, steps)

	slices := map[sliceKey]traceEvent{}
	named := map[int]string{}
	byTID := map[int][][2]int64{}
	for _, e := range evs {
		switch e.Ph {
		case "M":
			if e.Name == "thread_name" {
				var a struct{ Name string }
				require.NoError(t, json.Unmarshal(e.Args, &a))
				named[*e.TID] = a.Name
			}
		case "X":
			require.NotNil(t, e.TID)
			if e.Cat == "transfer" {
				continue // checked by TestPerfettoTransfers
			}
			var a stepArgs
			require.NoError(t, json.Unmarshal(e.Args, &a))
			k := sliceKey{a.StepID, e.Name}
			_, dup := slices[k]
			require.False(t, dup, "two %s slices for step %d", e.Name, a.StepID)
			slices[k] = e
			ts, err := strconv.ParseFloat(string(e.TS), 64)
			require.NoError(t, err)
			dur, err := strconv.ParseFloat(string(e.Dur), 64)
			require.NoError(t, err)
			require.GreaterOrEqual(t, dur, 0.0)
			byTID[*e.TID] = append(byTID[*e.TID], [2]int64{int64(ts*1000 + 0.5), int64((ts+dur)*1000 + 0.5)})
		}
	}
	for tid, iv := range byTID {
		require.Contains(t, named, tid, "track %d has no thread_name", tid)
		// No two slices on one track overlap (they would not nest).
		for i := range iv {
			for j := i + 1; j < len(iv) && j < i+32; j++ {
				a, b := iv[i], iv[j]
				require.False(t, a[0] < b[1] && b[0] < a[1] && a[1]-a[0] > 0 && b[1]-b[0] > 0,
					"track %d (%s): slices %v and %v overlap", tid, named[tid], a, b)
			}
		}
	}

	want := func(st datasets.Step, name string, start, end int64) {
		t.Helper()
		e, ok := slices[sliceKey{st.StepID, name}]
		require.True(t, ok, "step %d has no %s slice", st.StepID, name)
		require.Equal(t, us(start), string(e.TS), "step %d %s ts", st.StepID, name)
		require.Equal(t, us(end-start), string(e.Dur), "step %d %s dur", st.StepID, name)
		// The float a viewer reads is the nanosecond field over 1000.
		ts, _ := strconv.ParseFloat(string(e.TS), 64)
		dur, _ := strconv.ParseFloat(string(e.Dur), 64)
		require.Equal(t, float64(start)/1000, ts)
		require.Equal(t, float64(end-start)/1000, dur)
	}
	gpu := 0
	for _, st := range steps {
		want(st, "schedule", st.TScheduleStart, st.TScheduleEnd)
		want(st, "dispatch", st.TScheduleEnd, st.TDispatch)
		want(st, "wait", st.TDispatch, st.TOutput)
		want(st, "update", st.TOutput, st.TUpdateEnd)
		if st.GPUTimeNs >= 0 {
			end := st.TOutput - returnNs
			want(st, "gpu", end-st.GPUTimeNs, end)
			gpu++
			require.Contains(t, named[*slices[sliceKey{st.StepID, "gpu"}].TID], "device")
		} else {
			_, ok := slices[sliceKey{st.StepID, "gpu"}]
			require.False(t, ok, "step %d: gpu slice for an unknown gpu_time_ns", st.StepID)
		}
		require.Contains(t, named[*slices[sliceKey{st.StepID, "schedule"}].TID], st.WorkerID)
	}

	if !d.Has(datasets.TableRequests) {
		return
	}
	reqs, err := datasets.ReadAll[datasets.Request](d, datasets.TableRequests)
	require.NoError(t, err)
	type asyncEv struct{ b, e, n *traceEvent }
	byID := map[string]*asyncEv{}
	for i := range evs {
		e := &evs[i]
		if e.Ph != "b" && e.Ph != "e" && e.Ph != "n" {
			continue
		}
		require.Equal(t, "request", e.Cat)
		a := byID[e.ID]
		if a == nil {
			a = &asyncEv{}
			byID[e.ID] = a
		}
		switch e.Ph {
		case "b":
			require.Nil(t, a.b, "request %s begins twice", e.ID)
			a.b = e
		case "e":
			require.Nil(t, a.e, "request %s ends twice", e.ID)
			a.e = e
		case "n":
			a.n = e
		}
	}
	require.Len(t, byID, len(reqs))
	for _, r := range reqs {
		a := byID[r.ReqID]
		require.NotNil(t, a, "request %s missing", r.ReqID)
		require.NotNil(t, a.b)
		require.NotNil(t, a.e)
		require.Equal(t, a.b.Name, a.e.Name)
		require.Equal(t, us(r.ArrivalNs), string(a.b.TS), "request %s arrival", r.ReqID)
		if r.FinishNs >= r.ArrivalNs {
			require.Equal(t, us(r.FinishNs), string(a.e.TS), "request %s finish", r.ReqID)
		}
		if r.FirstTokenNs >= r.ArrivalNs {
			require.NotNil(t, a.n, "request %s has no first-token instant", r.ReqID)
			require.Equal(t, "first token", a.n.Name)
			require.Equal(t, us(r.FirstTokenNs), string(a.n.TS))
		} else {
			require.Nil(t, a.n)
		}
	}
}

// TestPerfettoH200Capture exports a real capture (the 5 req/s Azure traffic
// on an H200) and checks every slice against the dataset.
func TestPerfettoH200Capture(t *testing.T) {
	dir := filepath.Join("..", "h200", "traffic-azure-5rps")
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err != nil {
		t.Skip("bundled H200 dataset not present:", err)
	}
	out := filepath.Join(t.TempDir(), "trace.json")
	res, err := PerfettoTrace(dir, out, PerfettoOptions{BatchRows: 500})
	require.NoError(t, err)
	require.Equal(t, out, res.Path)
	require.Positive(t, res.Steps)
	require.Positive(t, res.Requests)
	require.Equal(t, []string{"gpu-0"}, res.Workers)
	evs := readTrace(t, out)
	require.EqualValues(t, res.Events, len(evs))
	checkTrace(t, dir, evs, 0)

	// The process is named after the dataset.
	found := false
	for _, e := range evs {
		if e.Ph == "M" && e.Name == "process_name" {
			found = bytes.Contains(e.Args, []byte("h200-traffic-azure-5rps"))
		}
	}
	require.True(t, found, "process_name names the dataset")
}

// TestPerfettoWorkersUnknownsAndReturn covers two workers, steps with
// unknown gpu time and reversed windows, unfinished requests, a known
// output return time and a file name that needs a new directory.
func TestPerfettoWorkersUnknownsAndReturn(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	var steps []datasets.Step
	for i := range 40 {
		w := i % 2
		base := int64(i/2)*5_000_123 + int64(w)*777
		st := datasets.Step{
			StepID: int64(i), WorkerID: fmt.Sprintf("gpu-%d", w), Kind: "decode", Role: "production", BenchmarkID: -1, Valid: true,
			TScheduleStart: base, TScheduleEnd: base + 11_111, TDispatch: base + 50_001,
			// Async: the output of step N arrives after step N+1 is dispatched.
			TOutput: base + 7_000_003, TUpdateEnd: base + 7_100_009,
			GPUTimeNs: 4_000_017, NumRunning: int32(i), KVBlocksUsed: int64(10 * i),
		}
		if i%7 == 3 {
			st.GPUTimeNs = -1
		}
		steps = append(steps, st)
	}
	reqs := []datasets.Request{
		{ReqID: "a", ArrivalNs: 1000, FirstScheduledNs: 2000, FirstTokenNs: 3_000_001, FinishNs: 9_000_999, Status: "finished"},
		{ReqID: "b \"q\"", ArrivalNs: 5000, FirstScheduledNs: -1, FirstTokenNs: -1, FinishNs: -1, Status: "waiting"},
	}
	w, err := datasets.Create(dir, datasets.Manifest{Name: "tiny"}, datasets.CreateOptions{})
	require.NoError(t, err)
	writeAll(t, w, datasets.TableSteps, steps)
	writeAll(t, w, datasets.TableRequests, reqs)
	require.NoError(t, w.Close())

	out := filepath.Join(t.TempDir(), "sub", "trace.json")
	res, err := PerfettoTrace(dir, out, PerfettoOptions{BatchRows: 3, OutputReturnNs: 30_000})
	require.NoError(t, err)
	require.Equal(t, []string{"gpu-0", "gpu-1"}, res.Workers)
	require.EqualValues(t, 40, res.Steps)
	require.EqualValues(t, 2, res.Requests)
	evs := readTrace(t, out)
	checkTrace(t, dir, evs, 30_000)

	// The unfinished request still closes its slice (at its arrival).
	for _, e := range evs {
		if e.Ph == "e" && e.ID == "b \"q\"" {
			require.Equal(t, us(5000), string(e.TS))
		}
	}
	// Overlapping waits (two steps in flight) went to a second lane.
	lanes := map[int]bool{}
	for _, e := range evs {
		if e.Ph == "X" && e.Name == "wait" {
			lanes[*e.TID] = true
		}
	}
	require.Len(t, lanes, 4, "two in-flight lanes per worker")
}

// A disaggregated cluster's KV transfers appear on a track of their
// sending worker, at their exact times, named after the receiver; two
// transfers that overlap go to two lanes.
func TestPerfettoTransfers(t *testing.T) {
	type transfer struct {
		ReqID   string `parquet:"req_id"`
		From    string `parquet:"from_worker,dict"`
		To      string `parquet:"to_worker,dict"`
		Bytes   int64  `parquet:"bytes,delta"`
		StartNs int64  `parquet:"start_ns,delta"`
		EndNs   int64  `parquet:"end_ns,delta"`
	}
	dir := filepath.Join(t.TempDir(), "ds")
	steps := []datasets.Step{
		{StepID: 0, WorkerID: "p-0", Kind: "prefill", Role: "production", BenchmarkID: -1, Valid: true,
			TScheduleStart: 0, TScheduleEnd: 10, TDispatch: 20, TOutput: 1_000, TUpdateEnd: 1_100, GPUTimeNs: 900},
		{StepID: 1, WorkerID: "d-0", Kind: "prefill", Role: "production", BenchmarkID: -1, Valid: true,
			TScheduleStart: 5_000, TScheduleEnd: 5_010, TDispatch: 5_020, TOutput: 6_000, TUpdateEnd: 6_100, GPUTimeNs: 900},
	}
	xfers := []transfer{
		{ReqID: "a", From: "p-0", To: "d-0", Bytes: 131_072_000, StartNs: 1_000, EndNs: 4_001},
		{ReqID: "b", From: "p-0", To: "d-1", Bytes: 1_000, StartNs: 2_000, EndNs: 2_500},
	}
	w, err := datasets.Create(dir, datasets.Manifest{Name: "pd"}, datasets.CreateOptions{})
	require.NoError(t, err)
	writeAll(t, w, datasets.TableSteps, steps)
	writeAll(t, w, datasets.TableTransfers, xfers)
	require.NoError(t, w.Close())
	out := filepath.Join(t.TempDir(), "trace.json")
	_, err = PerfettoTrace(dir, out, PerfettoOptions{})
	require.NoError(t, err)
	evs := readTrace(t, out)
	checkTrace(t, dir, evs, 0)
	named := map[int]string{}
	for _, e := range evs {
		if e.Ph == "M" && e.Name == "thread_name" {
			var a struct{ Name string }
			require.NoError(t, json.Unmarshal(e.Args, &a))
			named[*e.TID] = a.Name
		}
	}
	var got []traceEvent
	for _, e := range evs {
		if e.Ph == "X" && e.Cat == "transfer" {
			got = append(got, e)
		}
	}
	require.Len(t, got, 2)
	for i, x := range xfers {
		e := got[i]
		require.Equal(t, "kv → "+x.To, e.Name)
		require.Equal(t, us(x.StartNs), string(e.TS))
		require.Equal(t, us(x.EndNs-x.StartNs), string(e.Dur))
		require.Contains(t, named[*e.TID], "p-0 kv transfer")
		var a struct {
			ReqID string `json:"req_id"`
			Bytes int64  `json:"bytes"`
		}
		require.NoError(t, json.Unmarshal(e.Args, &a))
		require.Equal(t, x.ReqID, a.ReqID)
		require.Equal(t, x.Bytes, a.Bytes)
	}
	require.NotEqual(t, *got[0].TID, *got[1].TID, "overlapping transfers on two lanes")
}

func TestPerfettoNeedsSteps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	w, err := datasets.Create(dir, datasets.Manifest{}, datasets.CreateOptions{})
	require.NoError(t, err)
	writeAll(t, w, datasets.TableRequests, []datasets.Request{{ReqID: "x"}})
	require.NoError(t, w.Close())
	_, err = PerfettoTrace(dir, filepath.Join(t.TempDir(), "t.json"), PerfettoOptions{})
	require.ErrorContains(t, err, "steps table")
}

func TestUsec(t *testing.T) {
	for ns, want := range map[int64]string{0: "0.000", 1: "0.001", 999: "0.999", 1000: "1.000", 1234567: "1234.567", -1500: "-1.500", 9_000_000_000_123: "9000000000.123"} {
		require.Equal(t, want, us(ns))
	}
}

// The estimate counts what the export writes and is within 10% of its
// size; a window keeps only the steps scheduled and the requests alive in
// it, and the whole trace is then the sum of disjoint windows' steps.
func TestPerfettoEstimateAndWindow(t *testing.T) {
	dir := filepath.Join("..", "h200", "traffic-azure-12rps")
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err != nil {
		t.Skip("bundled H200 dataset not present:", err)
	}
	out := filepath.Join(t.TempDir(), "all.json")
	est, err := PerfettoEstimate(dir, PerfettoOptions{})
	require.NoError(t, err)
	res, err := PerfettoTrace(dir, out, PerfettoOptions{})
	require.NoError(t, err)
	require.Equal(t, res.Steps, est.Steps)
	require.Equal(t, res.Requests, est.Requests)
	st, err := os.Stat(out)
	require.NoError(t, err)
	require.InEpsilon(t, st.Size(), est.Bytes, 0.10, "estimate %d vs %d bytes", est.Bytes, st.Size())

	cut := int64(20e9)
	var steps int64
	for _, w := range [][2]int64{{0, cut}, {cut, 0}} {
		o := PerfettoOptions{FromNs: w[0], ToNs: w[1]}
		wo := filepath.Join(t.TempDir(), "w.json")
		r, err := PerfettoTrace(dir, wo, o)
		require.NoError(t, err)
		e, err := PerfettoEstimate(dir, o)
		require.NoError(t, err)
		require.Equal(t, r.Steps, e.Steps)
		require.Positive(t, r.Steps)
		require.Less(t, r.Requests, res.Requests)
		steps += r.Steps
		for _, ev := range readTrace(t, wo) {
			if ev.Ph == "X" && ev.Name == "schedule" {
				ts, err := strconv.ParseFloat(string(ev.TS), 64)
				require.NoError(t, err)
				require.GreaterOrEqual(t, ts*1e3, float64(w[0])-1)
				if w[1] > 0 {
					require.Less(t, ts*1e3, float64(w[1]))
				}
			}
		}
	}
	require.Equal(t, res.Steps, steps, "disjoint windows split the steps")
}
