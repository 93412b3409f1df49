package importers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/steplab/steplab/datasets"
)

// vLLM 0.19 defaults the importer assumes where meta.json's engine_kwargs
// do not say otherwise.
const (
	vllmDefaultBlockSize = 16
	vllmDefaultPrefix    = true // enable_prefix_caching
	vllmDefaultChunked   = true // enable_chunked_prefill
)

type vllmRecord struct {
	RequestID    json.RawMessage `json:"request_id"`
	InputToks    json.RawMessage `json:"input_toks"`
	OutputToks   json.RawMessage `json:"output_toks"`
	ArrivalTime  json.RawMessage `json:"arrival_time"`
	QueuedTS     json.RawMessage `json:"queued_ts"`
	ScheduledTS  json.RawMessage `json:"scheduled_ts"`
	FirstTokenTS json.RawMessage `json:"first_token_ts"`
	LastTokenTS  json.RawMessage `json:"last_token_ts"`
}

type vllmMeta struct {
	SchemaVersion *int                       `json:"schema_version"`
	Model         string                     `json:"model"`
	VLLMVersion   string                     `json:"vllm_version"`
	EngineKwargs  map[string]json.RawMessage `json:"engine_kwargs"`
	DatasetPath   string                     `json:"dataset_path"`
	DatasetHash   string                     `json:"dataset_hash"`
	NumRequests   *int                       `json:"num_requests"`
	StartedAt     string                     `json:"started_at"`
	FinishedAt    string                     `json:"finished_at"`
	TickSeconds   *float64                   `json:"tick_seconds"`
	// Sections of runs recorded since LLMServingSim 5daddb21; absent, or {}
	// when collection failed, in older runs.
	KVCache        map[string]json.RawMessage `json:"kv_cache"`
	Hardware       map[string]json.RawMessage `json:"hardware"`
	ResolvedConfig map[string]json.RawMessage `json:"resolved_config"`
}

// runVLLMRequests reads LLMServingSim's per-request vLLM log
// (requests.jsonl), the meta.json beside it and, when present, the engine
// time series timeseries.csv (see readVLLMTimeseries).
//
// Clocks. arrival_time is the client's wall clock (Unix seconds, when the
// benchmark sent the request; LLMServingSim bench/core/recorder.py @
// 5daddb21); queued_ts, scheduled_ts, first_token_ts and last_token_ts are
// the engine's monotonic clock (vLLM's RequestStateStats). vLLM stamps
// queued_ts when its engine core adds the request to the scheduler
// (Scheduler.add_request records EngineCoreEventType.QUEUED,
// vllm/v1/core/sched/scheduler.py @ b4622cf9), and the engine core's busy
// loop takes new requests off its input queue only between steps
// (EngineCoreProc.run_busy_loop: _process_input_queue, then
// _process_engine_step; vllm/v1/engine/core.py @ ac3cb2e2): a request that
// arrives mid-step waits up to a step before it is queued, and that wait
// is part of its TTFT. So the arrival is arrival_time mapped onto the
// engine clock: arrival_ns = arrival_time + offset, offset the smallest
// queued_ts − arrival_time of the run (the request picked up at once; the
// two clocks' difference plus the client-to-engine latency, taken as
// constant). Every event time is relative to the earliest arrival. A
// request without arrival_time arrives at its queued_ts; a file without
// any keeps queued_ts for all (noted).
//
// Order. The rows are written sorted by arrival_ns, stably, and the
// number of reordered rows is noted (with data parallelism each engine
// queues on its own). Within a request the events must satisfy queued <=
// scheduled <= first token <= last token; a violation is an error. A
// missing (null) scheduled/first/last time makes the request unfinished
// with those times Unknown; a missing queued_ts is an error.
func runVLLMRequests(in *input, s *sink) error {
	meta, metaErr := readVLLMMeta(in, s)
	if metaErr != nil {
		return metaErr
	}
	rows, err := readVLLMRows(in)
	if err != nil {
		return err
	}
	clk, queued, err := placeVLLMRows(in, rows)
	if err != nil {
		return err
	}
	if err := addSortedRequests(rows, func(rw vllmRow) int64 { return rw.r.ArrivalNs }, func(rw vllmRow) datasets.Request { return rw.r }, s,
		"arrival order differs from the file's: data-parallel engines queue independently"); err != nil {
		return err
	}
	if err := readVLLMTimeseries(in, s, queued, meta); err != nil {
		return err
	}
	vllmRequestsProvenance(s, meta, clk, rows)
	return nil
}

// vllmRow is one line of requests.jsonl: the request, its four event times
// in engine-clock seconds (queued, scheduled, first token, last token) and
// which of them it has.
type vllmRow struct {
	r    datasets.Request
	raw  [4]float64
	have [4]bool
	// arrival is arrival_time (wall clock), when the line has one.
	arrival     float64
	haveArrival bool
	line        int
}

// vllmEventNames are the fields of vllmRow.raw, in order.
var vllmEventNames = [4]string{"queued_ts", "scheduled_ts", "first_token_ts", "last_token_ts"}

// readVLLMRows reads requests.jsonl: one row per line, request ids unique.
func readVLLMRows(in *input) ([]vllmRow, error) {
	var rows []vllmRow
	seen := map[string]int{}
	lr := newLineReader(in)
	for {
		line, lineNo, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, lineError(in.name, lineNo, "%v", err)
		}
		var rec vllmRecord
		if err := decodeJSONLine(line, &rec); err != nil {
			return nil, lineError(in.name, lineNo, "%v", err)
		}
		id, err := rawID(rec.RequestID)
		if err != nil {
			return nil, lineError(in.name, lineNo, "request_id: %v", err)
		}
		if prev, dup := seen[id]; dup {
			return nil, lineError(in.name, lineNo, "request_id: %q already used on line %d", id, prev)
		}
		seen[id] = lineNo
		rw, err := newVLLMRow(&rec, id, lineNo)
		if err != nil {
			return nil, lineError(in.name, lineNo, "%v", err)
		}
		rows = append(rows, rw)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no requests", in.name)
	}
	return rows, nil
}

// newVLLMRow checks one record's token counts and event times (queued <=
// scheduled <= first token <= last token) and keeps them as a row.
func newVLLMRow(rec *vllmRecord, id string, lineNo int) (vllmRow, error) {
	var tok [2]int64
	var err error
	for k, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"input_toks", rec.InputToks}, {"output_toks", rec.OutputToks}} {
		if isNull(f.raw) {
			return vllmRow{}, fmt.Errorf("missing field %s", f.name)
		}
		if tok[k], err = parseCount(string(f.raw)); err != nil {
			return vllmRow{}, fmt.Errorf("%s: %v", f.name, err)
		}
	}
	rw := vllmRow{line: lineNo, r: datasets.Request{ReqID: id, PromptTokens: tok[0], OutputTokens: tok[1]}}
	if !isNull(rec.ArrivalTime) {
		a, err := strconv.ParseFloat(string(rec.ArrivalTime), 64)
		if _, ok := secondsToNs(a); err != nil || !ok {
			return vllmRow{}, fmt.Errorf("arrival_time: %s is not a number of seconds", rec.ArrivalTime)
		}
		rw.arrival, rw.haveArrival = a, true
	}
	for k, raw := range [4]json.RawMessage{rec.QueuedTS, rec.ScheduledTS, rec.FirstTokenTS, rec.LastTokenTS} {
		if isNull(raw) {
			if k == 0 {
				return vllmRow{}, errors.New("missing field queued_ts (the arrival time on the engine clock)")
			}
			continue
		}
		v, err := strconv.ParseFloat(string(raw), 64)
		if _, ok := secondsToNs(v); err != nil || !ok {
			return vllmRow{}, fmt.Errorf("%s: %s is not a number of seconds", vllmEventNames[k], raw)
		}
		rw.raw[k], rw.have[k] = v, true
	}
	last := 0
	for k := 1; k < 4; k++ {
		if !rw.have[k] {
			continue
		}
		if rw.raw[k] < rw.raw[last] {
			return vllmRow{}, fmt.Errorf("%s %.6f is earlier than %s %.6f", vllmEventNames[k], rw.raw[k], vllmEventNames[last], rw.raw[last])
		}
		last = k
	}
	return rw, nil
}

// vllmClock is how a run's two clocks were put on one: the client's wall
// clock onto the engine's monotonic one.
type vllmClock struct {
	// t0 is the earliest arrival on the engine clock, the time origin.
	t0 float64
	// offset is the smallest queued_ts − arrival_time; mapped counts the
	// rows with an arrival_time, firstArrival the earliest of them.
	offset       float64
	mapped       int
	firstArrival float64
	// waits are the mapped rows' queued_ts − arrival, sorted.
	waits []float64
}

// placeVLLMRows maps arrival_time onto the engine clock, sets every row's
// times in ns from t0 and its status, and returns the requests as the
// engine queued them (arrival = queued_ts), for the time series.
func placeVLLMRows(in *input, rows []vllmRow) (vllmClock, []datasets.Request, error) {
	// The wall clock onto the engine clock: the smallest queued − arrival.
	clk := vllmClock{offset: math.Inf(1)}
	for _, rw := range rows {
		if rw.haveArrival {
			if clk.mapped == 0 || rw.arrival < clk.firstArrival {
				clk.firstArrival = rw.arrival
			}
			clk.offset = min(clk.offset, rw.raw[0]-rw.arrival)
			clk.mapped++
		}
	}
	arrival := func(rw *vllmRow) float64 {
		if rw.haveArrival {
			return rw.arrival + clk.offset
		}
		return rw.raw[0]
	}
	clk.t0 = arrival(&rows[0])
	for i := range rows {
		clk.t0 = min(clk.t0, arrival(&rows[i]))
	}
	clk.waits = make([]float64, 0, clk.mapped)
	queued := make([]datasets.Request, len(rows))
	for i := range rows {
		rw := &rows[i]
		ns := [4]int64{datasets.Unknown, datasets.Unknown, datasets.Unknown, datasets.Unknown}
		for k := range ns {
			if rw.have[k] {
				v, ok := secondsToNs(rw.raw[k] - clk.t0)
				if !ok {
					return clk, nil, lineError(in.name, rw.line, "times span more than 9e9 s")
				}
				ns[k] = v
			}
		}
		a, ok := secondsToNs(arrival(rw) - clk.t0)
		if !ok {
			return clk, nil, lineError(in.name, rw.line, "arrival_time is more than 9e9 s from queued_ts")
		}
		if rw.haveArrival {
			clk.waits = append(clk.waits, rw.raw[0]-arrival(rw))
		}
		rw.r.ArrivalNs, rw.r.FirstScheduledNs, rw.r.FirstTokenNs, rw.r.FinishNs = min(a, ns[0]), ns[1], ns[2], ns[3]
		rw.r.NumPreemptions = int32(datasets.Unknown)
		rw.r.Status = datasets.StatusFinished
		if !rw.have[3] {
			rw.r.Status = datasets.StatusUnfinished
		}
		queued[i] = rw.r
		queued[i].ArrivalNs = ns[0]
	}
	sort.Float64s(clk.waits)
	return clk, queued, nil
}

// vllmRequestsProvenance records the clock mapping and the workload in the
// manifest and notes what the rows lack.
func vllmRequestsProvenance(s *sink, meta *vllmMeta, clk vllmClock, rows []vllmRow) {
	requests, unfinished := len(rows), 0
	for _, rw := range rows {
		if rw.r.Status != datasets.StatusFinished {
			unfinished++
		}
	}
	s.detail("t0_monotonic_s", strconv.FormatFloat(clk.t0, 'f', 9, 64))
	s.note("vllm-requests: first_scheduled_ns = scheduled_ts; first_token_ns = first_token_ts; finish_ns = last_token_ts; on the engine's monotonic clock relative to the earliest arrival; num_preemptions not recorded (-1)")
	switch {
	case clk.mapped == 0:
		s.detail("clock", "engine monotonic: arrival_ns = queued_ts (no arrival_time)")
		s.note("vllm-requests: no arrival_time: arrival_ns = queued_ts, so the wait before the engine loop picked a request up (up to a step) is missing from TTFT")
	default:
		s.detail("first_arrival_unix", strconv.FormatFloat(clk.firstArrival, 'f', 6, 64))
		s.detail("arrival_offset_s", strconv.FormatFloat(clk.offset, 'f', 6, 64))
		s.detail("clock", "engine monotonic; arrival_ns = arrival_time (client wall clock) + arrival_offset_s")
		waits := clk.waits
		s.note("vllm-requests: arrival_ns = arrival_time mapped onto the engine clock by the smallest queued_ts - arrival_time of the run (%.6f s): the wait until the engine loop queued a request counts in its TTFT (median %.1f ms, max %.1f ms)",
			clk.offset, 1e3*waits[len(waits)/2], 1e3*waits[len(waits)-1])
		if n := requests - clk.mapped; n > 0 {
			s.note("vllm-requests: %d requests have no arrival_time: arrival_ns = their queued_ts", n)
		}
	}
	if unfinished > 0 {
		s.note("%d requests have no last_token_ts: status unfinished", unfinished)
	}
	if meta != nil && meta.NumRequests != nil && *meta.NumRequests != requests {
		s.note("meta.json says num_requests=%d, requests.jsonl has %d", *meta.NumRequests, requests)
	}
	s.m.Workload = &datasets.Workload{Kind: "trace", Params: map[string]string{"format": "vllm-requests", "requests": strconv.Itoa(requests)}}
	if meta != nil {
		if meta.DatasetPath != "" {
			s.m.Workload.Params["dataset_path"] = meta.DatasetPath
		}
		if meta.DatasetHash != "" {
			s.m.Workload.Params["dataset_sha256"] = meta.DatasetHash
		}
		if seed, ok := meta.EngineKwargs["seed"]; ok {
			if v, err := strconv.ParseUint(string(seed), 10, 64); err == nil {
				s.m.Workload.Seed = v
			}
		}
	}
}

func rawID(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", errors.New("missing")
	}
	var sv string
	if err := json.Unmarshal(raw, &sv); err == nil {
		if sv == "" {
			return "", errors.New("empty")
		}
		return sv, nil
	}
	if _, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return string(raw), nil
	}
	return "", fmt.Errorf("%s is neither a string nor an integer", raw)
}

// readVLLMMeta reads meta.json beside the source and fills the manifest's
// Engine, Model, CUDAGraphSizes, Hardware (with config.json, if present)
// and Source.Detail. A missing meta.json is noted, not an error.
//
// meta.json (LLMServingSim bench/core/recorder.py, read at 5daddb21) always
// has engine_kwargs, the arguments the engine was given; runs recorded since
// the kv_cache, hardware and resolved_config sections were added also have
// what vLLM allocated and resolved. Each engine setting is taken from the
// most authoritative section that states it (see vllmSettings); a section
// that is absent, or {} when collection failed, is simply not consulted.
func readVLLMMeta(in *input, s *sink) (*vllmMeta, error) {
	b, err := in.sibling("meta.json")
	if errors.Is(err, fs.ErrNotExist) {
		s.note("no meta.json beside %s: engine limits and model unknown", in.name)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var meta vllmMeta
	if err := json.Unmarshal(b, &meta); err != nil {
		return nil, fmt.Errorf("meta.json: %v", jsonError(err))
	}
	if meta.SchemaVersion != nil && *meta.SchemaVersion != 1 {
		return nil, fmt.Errorf("meta.json: schema_version %d is not supported (want 1)", *meta.SchemaVersion)
	}
	lay, err := newMetaLayers(&meta)
	if err != nil {
		return nil, err
	}
	s.detail("meta_sha256", sha256Hex(b))
	kw := meta.EngineKwargs
	model := meta.Model
	if model == "" {
		model, _ = kwString(kw, "model")
	}
	if meta.VLLMVersion != "" {
		s.detail(datasets.DetailVLLMVersion, meta.VLLMVersion)
	}
	if model != "" {
		s.detail("model", model)
	}
	if meta.StartedAt != "" {
		s.m.Created = meta.StartedAt
		s.detail("started_at", meta.StartedAt)
	}
	if meta.FinishedAt != "" {
		s.detail("finished_at", meta.FinishedAt)
	}
	if meta.TickSeconds != nil {
		s.detail("tick_seconds", strconv.FormatFloat(*meta.TickSeconds, 'g', -1, 64))
	}
	// Every engine argument as given, for the record; the ones steplab
	// models are also mapped onto the manifest below.
	for _, k := range sortedKeys(kw) {
		if raw := kw[k]; k != "model" && !isNull(raw) {
			s.detail(k, metaValue(raw))
		}
	}

	eng := &datasets.EngineConfig{BlockSize: vllmDefaultBlockSize, PrefixCaching: vllmDefaultPrefix, ChunkedPrefill: vllmDefaultChunked}
	var dtype string
	var tp int
	var bad, assumed, conflicts []string
	for _, st := range vllmSettings(eng, &dtype, &tp) {
		found, err := lay.apply(st, &conflicts)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		if !found && st.assumed {
			assumed = append(assumed, st.name)
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("meta.json: %s", strings.Join(bad, "; "))
	}
	s.m.Engine = eng
	if lay.resolved != nil || lay.kv != nil {
		s.note("engine: settings from meta.json's resolved_config (what vLLM resolved) where it states them, then kv_cache (what it allocated), then engine_kwargs (what it was asked)")
	}
	for _, c := range conflicts {
		s.note("engine: %s", c)
	}
	if len(assumed) > 0 {
		s.note("engine: %s not in meta.json; vLLM 0.19 defaults assumed (block_size %d, prefix caching on, chunked prefill on)",
			strings.Join(assumed, ", "), vllmDefaultBlockSize)
	}
	if eng.MaxModelLen == 0 {
		s.note("engine: max_model_len not set in engine_kwargs (vLLM took it from the model config): recorded as 0")
	}
	if _, ok := lay.lookup("scheduler_config.async_scheduling", "engine_kwargs.async_scheduling"); !ok {
		eng.AsyncScheduling = vllmAsyncDefault(meta.VLLMVersion, eng, lay, s)
	}
	if eng.NumGPUBlocks > 0 {
		if eng.NumKVTokens > 0 && eng.NumKVTokens != eng.NumGPUBlocks*eng.BlockSize {
			s.note("engine: num_kv_tokens %d is not num_gpu_blocks %d × block_size %d", eng.NumKVTokens, eng.NumGPUBlocks, eng.BlockSize)
		}
		if eng.DataParallelSize > 1 {
			s.note("engine: num_gpu_blocks %d is the KV cache of each of the %d data-parallel ranks", eng.NumGPUBlocks, eng.DataParallelSize)
		}
	} else {
		s.note("engine: num_gpu_blocks not recorded (no kv_cache section in meta.json): the KV capacity is unknown")
	}
	if sizes, ok, err := lay.ints("compilation_config.cudagraph_capture_sizes"); err != nil {
		return nil, err
	} else if ok && len(sizes) > 0 {
		s.m.CUDAGraphSizes = sizes
	}
	if eager, _ := lay.lookup("model_config.enforce_eager"); string(eager) == "true" {
		s.note("engine: enforce_eager: vLLM ran without CUDA graphs")
	}
	for _, ref := range vllmDetailRefs {
		if raw, ok := lay.lookup(ref); ok {
			s.detail(ref, metaValue(raw))
		}
	}
	if raw, ok := lay.lookup("speculative_config"); ok && string(raw) != "{}" {
		s.note("engine: speculative decoding was configured; steplab's scheduler does not model it")
	}
	if model != "" {
		s.m.Model = &datasets.ModelShape{Name: model, DType: strings.TrimPrefix(dtype, "torch."), TensorParallel: tp}
		s.note("model: name and dtype only; layer shapes are not in the source")
	}
	readLLMServingSimConfig(in, s)
	readVLLMHardware(&meta, eng, s)
	return &meta, nil
}

// vllmAsyncSince is the first vLLM release that schedules asynchronously
// by default: v0.14.0 (vllm-project/vllm#27614, "Async scheduling is now
// enabled by default" in its release notes). SchedulerConfig.async_scheduling
// defaults to False before it (vllm/config/scheduler.py @ 01230b40) and to
// None after (@ 1f8758d5), which VllmConfig.__post_init__ turns on unless
// an incompatible option is set: pipeline parallelism (at that release),
// speculative decoding other than EAGLE/MTP-like methods, a pooling model,
// an executor without support (vllm/config/vllm.py @ 000fc94b).
var vllmAsyncSince = [2]int{0, 14}

// vllmAsyncDefault is the async_scheduling a run whose meta.json does not
// state it had: vLLM's default for the recorded version, noted either way.
func vllmAsyncDefault(version string, e *datasets.EngineConfig, lay *metaLayers, s *sink) bool {
	v, ok := vllmMinor(version)
	spec, _ := lay.lookup("speculative_config", "engine_kwargs.speculative_config")
	switch {
	case !ok:
		s.note("engine: async_scheduling not in meta.json, and no vLLM release number (vllm_version %q): recorded false, vLLM's default before %d.%d",
			version, vllmAsyncSince[0], vllmAsyncSince[1])
		return false
	case v[0] < vllmAsyncSince[0] || (v[0] == vllmAsyncSince[0] && v[1] < vllmAsyncSince[1]):
		s.note("engine: async_scheduling not in meta.json: recorded false, vLLM %s's default (asynchronous by default since %d.%d)",
			version, vllmAsyncSince[0], vllmAsyncSince[1])
		return false
	case e.PipelineParallelSize > 1 || (len(spec) > 0 && string(spec) != "{}"):
		s.note("engine: async_scheduling not in meta.json: recorded false; vLLM %s schedules asynchronously by default, but not with pipeline parallelism or speculative decoding, which this run configured",
			version)
		return false
	}
	s.note("engine: async_scheduling not in meta.json: recorded true, vLLM %s's default (asynchronous by default since %d.%d)",
		version, vllmAsyncSince[0], vllmAsyncSince[1])
	return true
}

// vllmMinor reads the major and minor numbers of a vLLM version
// ("0.19.0", "0.14.0rc1", "v0.11.2.dev5+g1234").
func vllmMinor(version string) ([2]int, bool) {
	parts := strings.SplitN(strings.TrimPrefix(strings.TrimSpace(version), "v"), ".", 3)
	if len(parts) < 2 {
		return [2]int{}, false
	}
	var v [2]int
	for i := range v {
		n, err := strconv.Atoi(parts[i])
		if err != nil || n < 0 {
			return [2]int{}, false
		}
		v[i] = n
	}
	return v, true
}

// vllmDetailRefs are resolved settings that shape a run but have no
// manifest field: recorded in Source.Detail under these names.
var vllmDetailRefs = []string{
	"scheduler_config.policy", "scheduler_config.max_num_partial_prefills", "scheduler_config.max_long_partial_prefills",
	"scheduler_config.scheduler_reserve_full_isl", "model_config.quantization", "model_config.enforce_eager",
	"compilation_config.mode", "compilation_config.cudagraph_mode", "kv_cache.num_cpu_blocks", "kv_cache.kv_cache_memory_bytes",
}

// vllmSetting maps one engine setting to the places of meta.json that state
// it, most authoritative first. A ref is "engine_kwargs.KEY", "kv_cache.KEY",
// or "SECTION.KEY" of resolved_config.
type vllmSetting struct {
	name    string
	refs    []string
	set     func(raw json.RawMessage) error
	assumed bool // absent: a vLLM default is assumed (noted)
}

func vllmSettings(e *datasets.EngineConfig, dtype *string, tp *int) []vllmSetting {
	return []vllmSetting{
		{name: "max_num_seqs", refs: []string{"scheduler_config.max_num_seqs", "engine_kwargs.max_num_seqs"}, set: setCount(&e.MaxNumSeqs)},
		{name: "max_num_batched_tokens", refs: []string{"scheduler_config.max_num_batched_tokens", "engine_kwargs.max_num_batched_tokens"},
			set: setCount(&e.MaxNumBatchedTokens)},
		{name: "max_model_len", refs: []string{"model_config.max_model_len", "engine_kwargs.max_model_len"}, set: setCount(&e.MaxModelLen)},
		{name: "block_size", refs: []string{"cache_config.block_size", "kv_cache.block_size", "engine_kwargs.block_size"},
			set: setCount(&e.BlockSize), assumed: true},
		{name: "num_gpu_blocks", refs: []string{"cache_config.num_gpu_blocks", "kv_cache.num_gpu_blocks", "engine_kwargs.num_gpu_blocks_override"},
			set: setCount(&e.NumGPUBlocks)},
		{name: "num_kv_tokens", refs: []string{"kv_cache.num_kv_tokens"}, set: setCount(&e.NumKVTokens)},
		{name: "gpu_memory_utilization", refs: []string{"cache_config.gpu_memory_utilization", "kv_cache.gpu_memory_utilization",
			"engine_kwargs.gpu_memory_utilization"}, set: setFraction(&e.GPUMemoryUtilization)},
		{name: "enable_prefix_caching", refs: []string{"cache_config.enable_prefix_caching", "kv_cache.enable_prefix_caching",
			"engine_kwargs.enable_prefix_caching"}, set: setBool(&e.PrefixCaching), assumed: true},
		{name: "enable_chunked_prefill", refs: []string{"scheduler_config.enable_chunked_prefill", "engine_kwargs.enable_chunked_prefill"},
			set: setBool(&e.ChunkedPrefill), assumed: true},
		{name: "long_prefill_token_threshold", refs: []string{"scheduler_config.long_prefill_token_threshold",
			"engine_kwargs.long_prefill_token_threshold"}, set: setCount(&e.LongPrefillTokenThreshold)},
		{name: "async_scheduling", refs: []string{"scheduler_config.async_scheduling", "engine_kwargs.async_scheduling"},
			set: setBool(&e.AsyncScheduling)},
		{name: "kv_cache_dtype", refs: []string{"cache_config.cache_dtype", "engine_kwargs.kv_cache_dtype"}, set: setString(&e.KVCacheDType)},
		{name: "tensor_parallel_size", refs: []string{"parallel_config.tensor_parallel_size", "engine_kwargs.tensor_parallel_size"},
			set: func(raw json.RawMessage) error {
				if err := setCount(&e.TensorParallelSize)(raw); err != nil {
					return err
				}
				*tp = e.TensorParallelSize
				return nil
			}},
		{name: "pipeline_parallel_size", refs: []string{"parallel_config.pipeline_parallel_size", "engine_kwargs.pipeline_parallel_size"},
			set: setCount(&e.PipelineParallelSize)},
		{name: "data_parallel_size", refs: []string{"parallel_config.data_parallel_size", "engine_kwargs.data_parallel_size"},
			set: setCount(&e.DataParallelSize)},
		{name: "enable_expert_parallel", refs: []string{"parallel_config.enable_expert_parallel", "engine_kwargs.enable_expert_parallel"},
			set: setBool(&e.ExpertParallel)},
		{name: "dtype", refs: []string{"model_config.dtype", "engine_kwargs.dtype"}, set: setString(dtype)},
	}
}

// metaValue is a meta.json value as text (see rawText), without torch's
// "torch." type prefix.
func metaValue(raw json.RawMessage) string { return strings.TrimPrefix(rawText(raw), "torch.") }

func setCount(dst *int) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		v, err := strconv.Atoi(string(raw))
		if err != nil || v < 0 {
			return errors.New("not a non-negative integer")
		}
		*dst = v
		return nil
	}
}

func setFraction(dst *float64) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		v, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || !(v > 0 && v <= 1) {
			return errors.New("not a fraction in (0, 1]")
		}
		*dst = v
		return nil
	}
}

func setBool(dst *bool) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		v, err := strconv.ParseBool(string(raw))
		if err != nil {
			return errors.New("not true or false")
		}
		*dst = v
		return nil
	}
}

func setString(dst *string) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		return json.Unmarshal(raw, dst)
	}
}

// metaLayers are the sections of meta.json a setting is looked up in.
type metaLayers struct {
	resolved map[string]map[string]json.RawMessage // resolved_config: sub-config → key → value
	top      map[string]json.RawMessage            // resolved_config's non-section keys
	kv, kw   map[string]json.RawMessage
}

func newMetaLayers(m *vllmMeta) (*metaLayers, error) {
	l := &metaLayers{kv: m.KVCache, kw: m.EngineKwargs}
	if len(m.KVCache) == 0 {
		l.kv = nil
	}
	if len(m.ResolvedConfig) > 0 {
		l.resolved, l.top = map[string]map[string]json.RawMessage{}, map[string]json.RawMessage{}
		for k, raw := range m.ResolvedConfig {
			var sec map[string]json.RawMessage
			if len(raw) > 0 && raw[0] == '{' {
				if err := json.Unmarshal(raw, &sec); err != nil {
					return nil, fmt.Errorf("meta.json: resolved_config.%s: %v", k, jsonError(err))
				}
				l.resolved[k] = sec
				l.top[k] = raw
				continue
			}
			l.top[k] = raw
		}
	}
	return l, nil
}

// lookup returns the first non-null value among refs.
func (l *metaLayers) lookup(refs ...string) (json.RawMessage, bool) {
	for _, ref := range refs {
		sec, key, _ := strings.Cut(ref, ".")
		var raw json.RawMessage
		switch sec {
		case "engine_kwargs":
			raw = l.kw[key]
		case "kv_cache":
			raw = l.kv[key]
		default:
			if key == "" {
				raw = l.top[sec]
			} else {
				raw = l.resolved[sec][key]
			}
		}
		if len(raw) > 0 && !isNull(raw) {
			return raw, true
		}
	}
	return nil, false
}

// apply sets st from the first ref that states it; a later ref that states
// a different value is recorded in conflicts.
func (l *metaLayers) apply(st vllmSetting, conflicts *[]string) (bool, error) {
	for i, ref := range st.refs {
		raw, ok := l.lookup(ref)
		if !ok {
			continue
		}
		if err := st.set(raw); err != nil {
			return true, fmt.Errorf("%s: %s is %v", ref, raw, err)
		}
		for _, other := range st.refs[i+1:] {
			if o, ok := l.lookup(other); ok && metaValue(o) != metaValue(raw) {
				*conflicts = append(*conflicts, fmt.Sprintf("%s %s from %s (%s says %s)", st.name, raw, ref, other, o))
			}
		}
		return true, nil
	}
	return false, nil
}

// ints reads a list of integers.
func (l *metaLayers) ints(ref string) ([]int, bool, error) {
	raw, ok := l.lookup(ref)
	if !ok {
		return nil, false, nil
	}
	var v []int
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, true, fmt.Errorf("meta.json: resolved_config.%s: not a list of integers", ref)
	}
	return v, true, nil
}

// readVLLMHardware takes the device from meta.json's hardware section (what
// torch reported) where the run has one; it names the GPU more exactly than
// the simulator's config.json label, which stays in Source.Detail.
func readVLLMHardware(meta *vllmMeta, eng *datasets.EngineConfig, s *sink) {
	h := meta.Hardware
	name, _ := kwString(h, "device_name")
	if s.m.Hardware == nil {
		if name == "" && eng.TensorParallelSize == 0 {
			return
		}
		// The GPUs one engine used: every rank of every parallel dimension.
		s.m.Hardware = &datasets.Hardware{GPUCount: max(1, eng.TensorParallelSize) * max(1, eng.PipelineParallelSize) * max(1, eng.DataParallelSize)}
	}
	if name != "" {
		if s.m.Hardware.GPUName != "" && s.m.Hardware.GPUName != name {
			s.detail("config_hardware", s.m.Hardware.GPUName)
		}
		s.m.Hardware.GPUName = name
	}
	if raw, ok := h["device_total_memory_bytes"]; ok {
		if v, err := strconv.ParseInt(string(raw), 10, 64); err == nil && v > 0 {
			s.m.Hardware.MemTotalBytes = v
		}
	}
	for _, k := range []string{"torch_version", "cuda_version", "device_capability", "device_count"} {
		if raw, ok := h[k]; ok && !isNull(raw) {
			s.detail(k, strings.Trim(string(raw), `"`))
		}
	}
}

// readLLMServingSimConfig takes the GPU name and count from the simulator's
// config.json where the run directory has one. Anything unexpected is
// ignored: the file is a convenience, not part of the request log.
func readLLMServingSimConfig(in *input, s *sink) {
	b, err := in.sibling("config.json")
	if err != nil {
		return
	}
	var cfg struct {
		Nodes []struct {
			Instances []struct {
				Hardware string `json:"hardware"`
				NumNPUs  int    `json:"num_npus"`
			} `json:"instances"`
		} `json:"nodes"`
	}
	if json.Unmarshal(b, &cfg) != nil {
		return
	}
	hw := &datasets.Hardware{}
	for _, n := range cfg.Nodes {
		for _, inst := range n.Instances {
			if hw.GPUName == "" {
				hw.GPUName = inst.Hardware
			}
			if inst.NumNPUs > 0 && inst.NumNPUs < 1<<20 {
				hw.GPUCount += inst.NumNPUs
			}
		}
	}
	if hw.GPUName != "" {
		s.m.Hardware = hw
	}
}

func kwString(kw map[string]json.RawMessage, key string) (string, bool) {
	raw, ok := kw[key]
	if !ok {
		return "", false
	}
	var v string
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	return v, true
}
