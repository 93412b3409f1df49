package export

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/internal/iocount"
)

// Perfetto is the format name of the step timeline in Chrome trace event
// format (JSON), which Perfetto (ui.perfetto.dev) and chrome://tracing open.
const Perfetto = "perfetto"

// PerfettoOptions tune PerfettoTrace.
type PerfettoOptions struct {
	// OutputReturnNs is the time from the end of the forward pass until the
	// model output reaches the scheduler (device-to-host copy, IPC), where
	// it is known: the device slice of a step ends at t_output minus it.
	// Datasets do not record it; 0 puts the end of the device slice at
	// t_output.
	OutputReturnNs int64
	// BatchRows bounds the rows held in memory; 0 means DefaultBatchRows.
	BatchRows int
	// NoRequests leaves the requests' async slices out.
	NoRequests bool
	// Progress, when set, is called after each batch with the rows of the
	// table written so far.
	Progress func(table string, rows int64)
	// FromNs and ToNs bound the trace to a window of the run [FromNs,
	// ToNs) (ToNs 0: to the end): the steps scheduled in it and the
	// requests alive in it.
	FromNs, ToNs int64

	// limit, when > 0, stops each table after that many rows (the sample
	// PerfettoEstimate writes).
	limit int64
}

// inWindow reports whether [start, end] meets the window.
func (o *PerfettoOptions) inWindow(start, end int64) bool {
	return end >= o.FromNs && (o.ToNs <= 0 || start < o.ToNs)
}

// progress reports rows of table after every BatchRows rows, and once more
// when the table is done so the last count is never left unreported.
func (o *PerfettoOptions) progress(table string, rows int64, done bool) {
	if o.Progress != nil && (done || rows%int64(o.BatchRows) == 0) {
		o.Progress(table, rows)
	}
}

// PerfettoResult says what PerfettoTrace wrote.
type PerfettoResult struct {
	Path     string   `json:"path"`
	Steps    int64    `json:"steps"`
	Requests int64    `json:"requests"`
	Events   int64    `json:"events"`
	Workers  []string `json:"workers"`
}

// Process and track layout of the trace. Each worker gets a block of
// thread ids: its scheduler thread (schedule, serialize/dispatch, update),
// its in-flight lanes (wait: dispatch to output; under async scheduling
// two steps are in flight at once, so waits that overlap go to a second
// lane) and its device lane (gpu). A slice goes to the first lane of its
// group whose slices all end before it starts, so slices on one track never
// overlap; lanes beyond the first are named "(2)", "(3)"...
const (
	perfettoPID      = 1
	tidsPerWorker    = 100
	laneHost         = 0  // schedule, dispatch, update
	laneWait         = 30 // in flight: dispatch → output
	laneDevice       = 60 // gpu
	laneTransfer     = 90 // kv transfers out of the worker
	lanesPerGroup    = 30
	perfettoReqCat   = "request"
	perfettoStepCat  = "step"
	perfettoQueueCat = "queue"
)

// perfettoStep is the projection of the steps table the trace needs.
type perfettoStep struct {
	StepID         int64  `parquet:"step_id"`
	WorkerID       string `parquet:"worker_id"`
	Kind           string `parquet:"kind"`
	Role           string `parquet:"role"`
	NumNewReqs     int32  `parquet:"num_new_reqs"`
	NumCachedReqs  int32  `parquet:"num_cached_reqs"`
	TotalTokens    int64  `parquet:"total_scheduled_tokens"`
	PayloadBytes   int64  `parquet:"payload_bytes"`
	TScheduleStart int64  `parquet:"t_schedule_start"`
	TScheduleEnd   int64  `parquet:"t_schedule_end"`
	TDispatch      int64  `parquet:"t_dispatch"`
	TOutput        int64  `parquet:"t_output"`
	TUpdateEnd     int64  `parquet:"t_update_end"`
	WallTimeNs     int64  `parquet:"wall_time_ns"`
	GPUTimeNs      int64  `parquet:"gpu_time_ns"`
	HostPrepNs     int64  `parquet:"host_prep_ns"`
	Overlapped     bool   `parquet:"overlapped"`
	NumWaiting     int32  `parquet:"num_waiting"`
	NumRunning     int32  `parquet:"num_running"`
	KVBlocksUsed   int64  `parquet:"kv_blocks_used"`
}

// perfettoRequest is the projection of the requests table the trace needs.
type perfettoRequest struct {
	ReqID          string `parquet:"req_id"`
	ArrivalNs      int64  `parquet:"arrival_ns"`
	PromptTokens   int64  `parquet:"prompt_tokens"`
	OutputTokens   int64  `parquet:"output_tokens"`
	FirstSchedNs   int64  `parquet:"first_scheduled_ns"`
	FirstTokenNs   int64  `parquet:"first_token_ns"`
	FinishNs       int64  `parquet:"finish_ns"`
	NumPreemptions int32  `parquet:"num_preemptions"`
	Status         string `parquet:"status"`
}

// perfettoTransfer is the projection of a cluster's transfers table.
type perfettoTransfer struct {
	ReqID   string `parquet:"req_id"`
	From    string `parquet:"from_worker"`
	To      string `parquet:"to_worker"`
	Bytes   int64  `parquet:"bytes"`
	StartNs int64  `parquet:"start_ns"`
	EndNs   int64  `parquet:"end_ns"`
}

// PerfettoTrace writes the step timeline of the dataset at dir to outPath
// as a Chrome trace event JSON object ({"traceEvents": [...]}):
//
//   - one process (pid 1) named after the dataset;
//   - per worker, a scheduler thread with the host phases of every step as
//     complete events ("ph":"X"): schedule (t_schedule_start →
//     t_schedule_end), dispatch (serialize and hand over: → t_dispatch)
//     and update (t_output → t_update_end); an in-flight thread with wait
//     (t_dispatch → t_output); and a device thread with gpu, a slice of
//     gpu_time_ns ending at t_output − OutputReturnNs (steps whose
//     gpu_time_ns is unknown have none);
//   - per worker, counters of running and waiting requests and KV blocks
//     used after each step;
//   - for a disaggregated cluster (a transfers table), per prefill worker
//     a kv transfer thread with each prompt KV it sent, from start_ns to
//     end_ns, named after the decode worker it went to;
//   - every request as an async slice ("ph":"b"/"e", cat "request", id the
//     req_id) from arrival_ns to finish_ns, with an async instant
//     ("ph":"n") "first token" at first_token_ns;
//   - metadata events ("ph":"M") naming the process and every thread.
//
// Timestamps and durations are microseconds written as exact decimals of
// the nanosecond fields (1234567 ns → 1234.567). A phase whose ends are
// unknown (negative) or reversed is left out. Rows stream in batches of
// BatchRows and events are written as they are made, so memory does not
// grow with the dataset. The file is written under a temporary name and
// renamed when complete.
func PerfettoTrace(dir, outPath string, opts PerfettoOptions) (*PerfettoResult, error) {
	if opts.BatchRows <= 0 {
		opts.BatchRows = DefaultBatchRows
	}
	d, err := datasets.Open(dir)
	if err != nil {
		return nil, err
	}
	if !d.Has(datasets.TableSteps) {
		return nil, fmt.Errorf("%s: the perfetto export needs the steps table, and the dataset has none", dir)
	}
	if outPath == "" {
		return nil, fmt.Errorf("perfetto export: no output file")
	}
	if d := filepath.Dir(outPath); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	res := &PerfettoResult{Path: outPath}
	_, err = writeAtomic(outPath, func(w io.Writer) (int64, error) {
		tw := newTraceWriter(w)
		if err := tw.run(d, opts, res); err != nil {
			return 0, err
		}
		return tw.events, tw.bw.Flush()
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// stepStart is when a step begins on the timeline: its schedule() call,
// else its output where a source did not record the call.
func stepStart(st *perfettoStep) int64 {
	if st.TScheduleStart >= 0 {
		return st.TScheduleStart
	}
	return st.TOutput
}

// requestEnd is where a request's slice ends: its finish, else the last
// thing known of it.
func requestEnd(r *perfettoRequest) int64 {
	if r.FinishNs >= r.ArrivalNs {
		return r.FinishNs
	}
	return max(r.ArrivalNs, r.FirstSchedNs, r.FirstTokenNs)
}

// PerfettoSize is what a Perfetto export of a dataset would hold and about
// how large the file would be.
type PerfettoSize struct {
	Steps    int64 `json:"steps"`
	Requests int64 `json:"requests"`
	Bytes    int64 `json:"bytes"`
}

// perfettoSample is how many steps and requests the estimate renders.
const perfettoSample = 2000

// PerfettoEstimate counts the steps and requests an export with opts would
// write and estimates the file's size by rendering the first of them: a
// caller can announce a large file, or bound it with a window, before
// writing anything.
func PerfettoEstimate(dir string, opts PerfettoOptions) (*PerfettoSize, error) {
	d, err := datasets.Open(dir)
	if err != nil {
		return nil, err
	}
	size := &PerfettoSize{}
	if d.Has(datasets.TableSteps) {
		sc, err := datasets.Scan[perfettoStepTimes](d, datasets.TableSteps)
		if err != nil {
			return nil, err
		}
		defer sc.Close()
		for st, err := range sc.All() {
			if err != nil {
				return nil, err
			}
			at := stepStart(&perfettoStep{TScheduleStart: st.TScheduleStart, TOutput: st.TOutput})
			if opts.inWindow(at, at) {
				size.Steps++
			}
		}
	}
	if !opts.NoRequests && d.Has(datasets.TableRequests) {
		rs, err := datasets.Scan[perfettoRequestTimes](d, datasets.TableRequests)
		if err != nil {
			return nil, err
		}
		defer rs.Close()
		for r, err := range rs.All() {
			if err != nil {
				return nil, err
			}
			pr := perfettoRequest{ArrivalNs: r.ArrivalNs, FirstSchedNs: r.FirstSchedNs, FirstTokenNs: r.FirstTokenNs, FinishNs: r.FinishNs}
			if r.ArrivalNs >= 0 && opts.inWindow(r.ArrivalNs, requestEnd(&pr)) {
				size.Requests++
			}
		}
	}
	// Render a sample of steps alone, then with requests: each kind of
	// row weighs what it weighed in the sample.
	stepsOnly := opts
	stepsOnly.NoRequests = true
	sBytes, sRes, err := perfettoSampleSize(d, stepsOnly)
	if err != nil {
		return nil, err
	}
	size.Bytes = sBytes
	if sRes.Steps > 0 {
		size.Bytes += int64(float64(sBytes) / float64(sRes.Steps) * float64(size.Steps-sRes.Steps))
	}
	if size.Requests > 0 {
		aBytes, aRes, err := perfettoSampleSize(d, opts)
		if err != nil {
			return nil, err
		}
		if aRes.Requests > 0 {
			size.Bytes += int64(float64(aBytes-sBytes) / float64(aRes.Requests) * float64(size.Requests))
		}
	}
	return size, nil
}

// perfettoSampleSize renders the first perfettoSample steps and requests
// of an export to a counter.
func perfettoSampleSize(d *datasets.Dataset, opts PerfettoOptions) (int64, *PerfettoResult, error) {
	opts.limit, opts.Progress = perfettoSample, nil
	if opts.BatchRows <= 0 {
		opts.BatchRows = DefaultBatchRows
	}
	cw := &iocount.Writer{}
	tw := newTraceWriter(cw)
	res := &PerfettoResult{}
	if err := tw.run(d, opts, res); err != nil {
		return 0, nil, err
	}
	if err := tw.bw.Flush(); err != nil {
		return 0, nil, err
	}
	return cw.N, res, nil
}

// perfettoStepTimes and perfettoRequestTimes are the columns the estimate
// counts with.
type perfettoStepTimes struct {
	TScheduleStart int64 `parquet:"t_schedule_start"`
	TOutput        int64 `parquet:"t_output"`
}

type perfettoRequestTimes struct {
	ArrivalNs    int64 `parquet:"arrival_ns"`
	FirstSchedNs int64 `parquet:"first_scheduled_ns"`
	FirstTokenNs int64 `parquet:"first_token_ns"`
	FinishNs     int64 `parquet:"finish_ns"`
}

type traceWriter struct {
	bw     *bufio.Writer
	buf    []byte
	events int64
	first  bool

	workers map[string]*workerTracks
	order   []string
}

type workerTracks struct {
	base  int
	lanes map[int][]*laneState // group → its lanes
}

// laneRecent is how many recent slices a lane remembers. Rows arrive in
// step order, not time order (under async scheduling step N's update comes
// after step N+1's schedule), so a lane checks a new slice against its
// recent slices, and against the latest end of those it has forgotten.
const laneRecent = 8

type laneState struct {
	horizon int64 // latest end of the slices no longer remembered
	recent  [laneRecent][2]int64
	n, next int
}

func (l *laneState) fits(start, end int64) bool {
	if start < l.horizon {
		return false
	}
	for i := range l.n {
		r := l.recent[i]
		if start < r[1] && r[0] < end {
			return false
		}
	}
	return true
}

func (l *laneState) add(start, end int64) {
	if l.n == laneRecent {
		l.horizon = max(l.horizon, l.recent[l.next][1])
	} else {
		l.n++
	}
	l.recent[l.next] = [2]int64{start, end}
	l.next = (l.next + 1) % laneRecent
}

func newTraceWriter(w io.Writer) *traceWriter {
	return &traceWriter{bw: bufio.NewWriterSize(w, 1<<16), first: true, workers: map[string]*workerTracks{}}
}

// usec appends ns as microseconds with three exact decimals.
func usec(b []byte, ns int64) []byte {
	if ns < 0 {
		b = append(b, '-')
		ns = -ns
	}
	b = strconv.AppendInt(b, ns/1000, 10)
	f := ns % 1000
	b = append(b, '.', byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10))
	return b
}

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}

// begin starts an event object (with the separating comma).
func (t *traceWriter) begin() {
	t.buf = t.buf[:0]
	if !t.first {
		t.buf = append(t.buf, ",\n"...)
	}
	t.first = false
	t.buf = append(t.buf, '{')
}

func (t *traceWriter) end() error {
	t.buf = append(t.buf, '}')
	t.events++
	_, err := t.bw.Write(t.buf)
	return err
}

func (t *traceWriter) meta(name string, tid int, value string, sortIndex int) error {
	t.begin()
	t.buf = append(t.buf, `"ph":"M","pid":`...)
	t.buf = strconv.AppendInt(t.buf, perfettoPID, 10)
	if tid >= 0 {
		t.buf = append(t.buf, `,"tid":`...)
		t.buf = strconv.AppendInt(t.buf, int64(tid), 10)
	}
	t.buf = append(t.buf, `,"name":`...)
	t.buf = appendJSONString(t.buf, name)
	t.buf = append(t.buf, `,"args":{"name":`...)
	t.buf = appendJSONString(t.buf, value)
	t.buf = append(t.buf, '}')
	if err := t.end(); err != nil {
		return err
	}
	if sortIndex >= 0 {
		t.begin()
		t.buf = append(t.buf, `"ph":"M","pid":`...)
		t.buf = strconv.AppendInt(t.buf, perfettoPID, 10)
		if tid >= 0 {
			t.buf = append(t.buf, `,"tid":`...)
			t.buf = strconv.AppendInt(t.buf, int64(tid), 10)
			t.buf = append(t.buf, `,"name":"thread_sort_index","args":{"sort_index":`...)
		} else {
			t.buf = append(t.buf, `,"name":"process_sort_index","args":{"sort_index":`...)
		}
		t.buf = strconv.AppendInt(t.buf, int64(sortIndex), 10)
		t.buf = append(t.buf, '}')
		return t.end()
	}
	return nil
}

var laneNames = map[int]string{laneHost: "scheduler (host)", laneWait: "in flight (dispatch → output)", laneDevice: "device (gpu)",
	laneTransfer: "kv transfer (out)"}

// worker returns the tracks of a worker, naming them on first sight.
func (t *traceWriter) worker(id string) *workerTracks {
	w := t.workers[id]
	if w == nil {
		w = &workerTracks{base: (len(t.order) + 1) * tidsPerWorker, lanes: map[int][]*laneState{}}
		t.workers[id] = w
		t.order = append(t.order, id)
	}
	return w
}

// lane picks the track of group for a slice [start, end): the first lane
// whose slices it does not overlap; it names a new lane when it opens one.
func (t *traceWriter) lane(wid string, w *workerTracks, group int, start, end int64) (int, error) {
	lanes := w.lanes[group]
	for i, l := range lanes {
		if l.fits(start, end) {
			l.add(start, end)
			return w.base + group + i, nil
		}
	}
	i := len(lanes)
	if i >= lanesPerGroup {
		i = lanesPerGroup - 1 // pathological overlap: share the last lane
		lanes[i].add(start, end)
		return w.base + group + i, nil
	}
	l := &laneState{}
	l.add(start, end)
	w.lanes[group] = append(lanes, l)
	name := wid + " " + laneNames[group]
	if i > 0 {
		name += fmt.Sprintf(" (%d)", i+1)
	}
	tid := w.base + group + i
	return tid, t.meta("thread_name", tid, name, tid)
}

// slice writes a complete event; it skips a phase whose ends are unknown
// or reversed.
func (t *traceWriter) slice(wid string, w *workerTracks, group int, name string, start, end int64, st *perfettoStep) error {
	if start < 0 || end < 0 || end < start {
		return nil
	}
	tid, err := t.lane(wid, w, group, start, end)
	if err != nil {
		return err
	}
	t.begin()
	t.buf = append(t.buf, `"ph":"X","cat":"`...)
	t.buf = append(t.buf, perfettoStepCat...)
	t.buf = append(t.buf, `","name":`...)
	t.buf = appendJSONString(t.buf, name)
	t.buf = append(t.buf, `,"pid":`...)
	t.buf = strconv.AppendInt(t.buf, perfettoPID, 10)
	t.buf = append(t.buf, `,"tid":`...)
	t.buf = strconv.AppendInt(t.buf, int64(tid), 10)
	t.buf = append(t.buf, `,"ts":`...)
	t.buf = usec(t.buf, start)
	t.buf = append(t.buf, `,"dur":`...)
	t.buf = usec(t.buf, end-start)
	t.buf = append(t.buf, `,"args":{"step_id":`...)
	t.buf = strconv.AppendInt(t.buf, st.StepID, 10)
	t.buf = append(t.buf, `,"kind":`...)
	t.buf = appendJSONString(t.buf, st.Kind)
	if name == "schedule" || name == "gpu" {
		t.buf = append(t.buf, `,"role":`...)
		t.buf = appendJSONString(t.buf, st.Role)
		t.buf = append(t.buf, `,"new_reqs":`...)
		t.buf = strconv.AppendInt(t.buf, int64(st.NumNewReqs), 10)
		t.buf = append(t.buf, `,"cached_reqs":`...)
		t.buf = strconv.AppendInt(t.buf, int64(st.NumCachedReqs), 10)
		t.buf = append(t.buf, `,"scheduled_tokens":`...)
		t.buf = strconv.AppendInt(t.buf, st.TotalTokens, 10)
		t.buf = append(t.buf, `,"payload_bytes":`...)
		t.buf = strconv.AppendInt(t.buf, st.PayloadBytes, 10)
		t.buf = append(t.buf, `,"wall_time_ns":`...)
		t.buf = strconv.AppendInt(t.buf, st.WallTimeNs, 10)
		t.buf = append(t.buf, `,"gpu_time_ns":`...)
		t.buf = strconv.AppendInt(t.buf, st.GPUTimeNs, 10)
		t.buf = append(t.buf, `,"host_prep_ns":`...)
		t.buf = strconv.AppendInt(t.buf, st.HostPrepNs, 10)
		t.buf = append(t.buf, `,"overlapped":`...)
		t.buf = strconv.AppendBool(t.buf, st.Overlapped)
	}
	t.buf = append(t.buf, "}"...)
	return t.end()
}

func (t *traceWriter) counter(w *workerTracks, wid, name string, ts int64, kv ...any) error {
	t.begin()
	t.buf = append(t.buf, `"ph":"C","name":`...)
	t.buf = appendJSONString(t.buf, wid+" "+name)
	t.buf = append(t.buf, `,"pid":`...)
	t.buf = strconv.AppendInt(t.buf, perfettoPID, 10)
	t.buf = append(t.buf, `,"ts":`...)
	t.buf = usec(t.buf, ts)
	t.buf = append(t.buf, `,"args":{`...)
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			t.buf = append(t.buf, ',')
		}
		t.buf = appendJSONString(t.buf, kv[i].(string))
		t.buf = append(t.buf, ':')
		t.buf = strconv.AppendInt(t.buf, kv[i+1].(int64), 10)
	}
	t.buf = append(t.buf, '}')
	return t.end()
}

func (t *traceWriter) async(ph byte, name, id string, ts int64, args func()) error {
	t.begin()
	t.buf = append(t.buf, `"ph":"`...)
	t.buf = append(t.buf, ph)
	t.buf = append(t.buf, `","cat":"`...)
	t.buf = append(t.buf, perfettoReqCat...)
	t.buf = append(t.buf, `","name":`...)
	t.buf = appendJSONString(t.buf, name)
	t.buf = append(t.buf, `,"id":`...)
	t.buf = appendJSONString(t.buf, id)
	t.buf = append(t.buf, `,"pid":`...)
	t.buf = strconv.AppendInt(t.buf, perfettoPID, 10)
	t.buf = append(t.buf, `,"tid":0,"ts":`...)
	t.buf = usec(t.buf, ts)
	if args != nil {
		t.buf = append(t.buf, `,"args":{`...)
		args()
		t.buf = append(t.buf, '}')
	}
	return t.end()
}

// transfers draws every KV transfer on its sending worker's transfer
// track.
func (t *traceWriter) transfers(d *datasets.Dataset) error {
	sc, err := datasets.Scan[perfettoTransfer](d, datasets.TableTransfers)
	if err != nil {
		return err
	}
	defer sc.Close()
	for x, err := range sc.All() {
		if err != nil {
			return err
		}
		if x.StartNs < 0 || x.EndNs < x.StartNs {
			continue
		}
		w := t.worker(x.From)
		tid, err := t.lane(x.From, w, laneTransfer, x.StartNs, x.EndNs)
		if err != nil {
			return err
		}
		t.begin()
		t.buf = append(t.buf, `"ph":"X","cat":"transfer","name":`...)
		t.buf = appendJSONString(t.buf, "kv → "+x.To)
		t.buf = append(t.buf, `,"pid":`...)
		t.buf = strconv.AppendInt(t.buf, perfettoPID, 10)
		t.buf = append(t.buf, `,"tid":`...)
		t.buf = strconv.AppendInt(t.buf, int64(tid), 10)
		t.buf = append(t.buf, `,"ts":`...)
		t.buf = usec(t.buf, x.StartNs)
		t.buf = append(t.buf, `,"dur":`...)
		t.buf = usec(t.buf, x.EndNs-x.StartNs)
		t.buf = append(t.buf, `,"args":{"req_id":`...)
		t.buf = appendJSONString(t.buf, x.ReqID)
		t.buf = append(t.buf, `,"to":`...)
		t.buf = appendJSONString(t.buf, x.To)
		t.buf = append(t.buf, `,"bytes":`...)
		t.buf = strconv.AppendInt(t.buf, x.Bytes, 10)
		t.buf = append(t.buf, "}"...)
		if err := t.end(); err != nil {
			return err
		}
	}
	return sc.Close()
}

func (t *traceWriter) run(d *datasets.Dataset, opts PerfettoOptions, res *PerfettoResult) error {
	if err := t.head(d); err != nil {
		return err
	}
	if err := t.steps(d, &opts, res); err != nil {
		return err
	}
	if d.Has(datasets.TableTransfers) {
		if err := t.transfers(d); err != nil {
			return err
		}
	}
	if !opts.NoRequests && d.Has(datasets.TableRequests) {
		if err := t.requests(d, &opts, res); err != nil {
			return err
		}
	}
	res.Workers = t.order
	_, err := t.bw.WriteString("\n]}\n")
	res.Events = t.events
	return err
}

// head opens the trace: the dataset's name and schema version, and the
// process track named after it.
func (t *traceWriter) head(d *datasets.Dataset) error {
	name := filepath.Base(d.Dir)
	if d.Manifest != nil && d.Manifest.Name != "" {
		name = d.Manifest.Name
	}
	head := []byte(`{"displayTimeUnit":"ns","otherData":{"dataset":`)
	head = appendJSONString(head, name)
	head = append(head, `,"schema_version":`...)
	if d.Manifest != nil {
		head = strconv.AppendInt(head, int64(d.Manifest.SchemaVersion), 10)
	} else {
		head = append(head, '0')
	}
	head = append(head, `,"time_unit":"microseconds since the run's start (ns fields / 1000)"},"traceEvents":[`+"\n"...)
	if _, err := t.bw.Write(head); err != nil {
		return err
	}
	return t.meta("process_name", -1, "steplab "+name, 0)
}

// steps draws every step in the window on its worker's tracks: the host
// phases, the wait for output, the GPU time, and the request and KV
// counters.
func (t *traceWriter) steps(d *datasets.Dataset, opts *PerfettoOptions, res *PerfettoResult) error {
	sc, err := datasets.Scan[perfettoStep](d, datasets.TableSteps)
	if err != nil {
		return err
	}
	defer sc.Close()
	for st, err := range sc.All() {
		if err != nil {
			return err
		}
		if at := stepStart(st); !opts.inWindow(at, at) {
			continue
		}
		if opts.limit > 0 && res.Steps >= opts.limit {
			break
		}
		wid := st.WorkerID
		if wid == "" {
			wid = "worker"
		}
		w := t.worker(wid)
		phases := []struct {
			group      int
			name       string
			start, end int64
		}{
			{laneHost, "schedule", st.TScheduleStart, st.TScheduleEnd},
			{laneHost, "dispatch", st.TScheduleEnd, st.TDispatch},
			{laneWait, "wait", st.TDispatch, st.TOutput},
			{laneHost, "update", st.TOutput, st.TUpdateEnd},
		}
		for _, p := range phases {
			if err := t.slice(wid, w, p.group, p.name, p.start, p.end, st); err != nil {
				return err
			}
		}
		if st.GPUTimeNs >= 0 && st.TOutput >= 0 {
			end := st.TOutput - opts.OutputReturnNs
			if err := t.slice(wid, w, laneDevice, "gpu", end-st.GPUTimeNs, end, st); err != nil {
				return err
			}
		}
		if ts := max(st.TUpdateEnd, st.TOutput); ts >= 0 {
			if err := t.counter(w, wid, "requests", ts, "running", int64(st.NumRunning), "waiting", int64(st.NumWaiting)); err != nil {
				return err
			}
			if err := t.counter(w, wid, "kv blocks used", ts, "blocks", st.KVBlocksUsed); err != nil {
				return err
			}
		}
		res.Steps++
		opts.progress(datasets.TableSteps, res.Steps, false)
	}
	if err := sc.Close(); err != nil {
		return err
	}
	opts.progress(datasets.TableSteps, res.Steps, true)
	return nil
}

// requests draws every request in the window as an async slice from
// arrival to its end, with its first token as an instant.
func (t *traceWriter) requests(d *datasets.Dataset, opts *PerfettoOptions, res *PerfettoResult) error {
	rs, err := datasets.Scan[perfettoRequest](d, datasets.TableRequests)
	if err != nil {
		return err
	}
	defer rs.Close()
	for r, err := range rs.All() {
		if err != nil {
			return err
		}
		if r.ArrivalNs < 0 {
			continue
		}
		end := requestEnd(r)
		if !opts.inWindow(r.ArrivalNs, end) {
			continue
		}
		if opts.limit > 0 && res.Requests >= opts.limit {
			break
		}
		label := "req " + r.ReqID
		err := t.async('b', label, r.ReqID, r.ArrivalNs, func() {
			t.buf = append(t.buf, `"req_id":`...)
			t.buf = appendJSONString(t.buf, r.ReqID)
			t.buf = append(t.buf, `,"prompt_tokens":`...)
			t.buf = strconv.AppendInt(t.buf, r.PromptTokens, 10)
			t.buf = append(t.buf, `,"output_tokens":`...)
			t.buf = strconv.AppendInt(t.buf, r.OutputTokens, 10)
			t.buf = append(t.buf, `,"first_scheduled_ns":`...)
			t.buf = strconv.AppendInt(t.buf, r.FirstSchedNs, 10)
			t.buf = append(t.buf, `,"num_preemptions":`...)
			t.buf = strconv.AppendInt(t.buf, int64(r.NumPreemptions), 10)
			t.buf = append(t.buf, `,"status":`...)
			t.buf = appendJSONString(t.buf, r.Status)
		})
		if err != nil {
			return err
		}
		if r.FirstTokenNs >= r.ArrivalNs && r.FirstTokenNs <= end {
			if err := t.async('n', "first token", r.ReqID, r.FirstTokenNs, nil); err != nil {
				return err
			}
		}
		if err := t.async('e', label, r.ReqID, end, nil); err != nil {
			return err
		}
		res.Requests++
		opts.progress(datasets.TableRequests, res.Requests, false)
	}
	if err := rs.Close(); err != nil {
		return err
	}
	opts.progress(datasets.TableRequests, res.Requests, true)
	return nil
}
