package importers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
}

// runVLLMRequests reads LLMServingSim's per-request vLLM log
// (requests.jsonl) and the meta.json beside it.
//
// Clocks. arrival_time is the client's wall clock (Unix seconds, taken when
// the benchmark sent the request); queued_ts, scheduled_ts, first_token_ts
// and last_token_ts are the engine's monotonic clock (vLLM's
// RequestStateStats). The two cannot be subtracted from each other, so the
// importer uses only the engine clock: arrival_ns = queued_ts, and every
// event time is relative to the earliest queued_ts of the file. arrival_time
// is kept only as the wall-clock start in Source.Detail.
//
// Order. With data parallelism each engine queues on its own, so queued_ts
// is not monotonic in file order (sub-millisecond inversions in the Qwen3
// DP=2 run); the rows are written sorted by arrival_ns, stably, and the
// number of reordered rows is noted. Within a request the events must
// satisfy queued <= scheduled <= first token <= last token; a violation is
// an error. A missing (null) scheduled/first/last time makes the request
// unfinished with those times Unknown; a missing queued_ts is an error.
func runVLLMRequests(in *input, s *sink) error {
	meta, metaErr := readVLLMMeta(in, s)
	if metaErr != nil {
		return metaErr
	}
	type row struct {
		r    datasets.Request
		raw  [4]float64
		have [4]bool
		line int
	}
	var rows []row
	seen := map[string]int{}
	var firstArrival float64
	haveArrival := false
	lr := newLineReader(in)
	for {
		line, lineNo, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return lineError(in.name, lineNo, "%v", err)
		}
		var rec vllmRecord
		if err := decodeJSONLine(line, &rec); err != nil {
			return lineError(in.name, lineNo, "%v", err)
		}
		id, err := rawID(rec.RequestID)
		if err != nil {
			return lineError(in.name, lineNo, "request_id: %v", err)
		}
		if prev, dup := seen[id]; dup {
			return lineError(in.name, lineNo, "request_id: %q already used on line %d", id, prev)
		}
		seen[id] = lineNo
		var tok [2]int64
		for k, f := range []struct {
			name string
			raw  json.RawMessage
		}{{"input_toks", rec.InputToks}, {"output_toks", rec.OutputToks}} {
			if isNull(f.raw) {
				return lineError(in.name, lineNo, "missing field %s", f.name)
			}
			if tok[k], err = parseCount(string(f.raw)); err != nil {
				return lineError(in.name, lineNo, "%s: %v", f.name, err)
			}
		}
		if !isNull(rec.ArrivalTime) {
			a, err := strconv.ParseFloat(string(rec.ArrivalTime), 64)
			if err != nil {
				return lineError(in.name, lineNo, "arrival_time: %s is not a number of seconds", rec.ArrivalTime)
			}
			if !haveArrival || a < firstArrival {
				firstArrival, haveArrival = a, true
			}
		}
		rw := row{line: lineNo, r: datasets.Request{ReqID: id, PromptTokens: tok[0], OutputTokens: tok[1]}}
		names := [4]string{"queued_ts", "scheduled_ts", "first_token_ts", "last_token_ts"}
		for k, raw := range [4]json.RawMessage{rec.QueuedTS, rec.ScheduledTS, rec.FirstTokenTS, rec.LastTokenTS} {
			if isNull(raw) {
				if k == 0 {
					return lineError(in.name, lineNo, "missing field queued_ts (the arrival time on the engine clock)")
				}
				continue
			}
			v, err := strconv.ParseFloat(string(raw), 64)
			if _, ok := secondsToNs(v); err != nil || !ok {
				return lineError(in.name, lineNo, "%s: %s is not a number of seconds", names[k], raw)
			}
			rw.raw[k], rw.have[k] = v, true
		}
		last := 0
		for k := 1; k < 4; k++ {
			if !rw.have[k] {
				continue
			}
			if rw.raw[k] < rw.raw[last] {
				return lineError(in.name, lineNo, "%s %.6f is earlier than %s %.6f", names[k], rw.raw[k], names[last], rw.raw[last])
			}
			last = k
		}
		rows = append(rows, rw)
	}
	if len(rows) == 0 {
		return fmt.Errorf("%s: no requests", in.name)
	}
	t0 := rows[0].raw[0]
	for _, rw := range rows {
		if rw.raw[0] < t0 {
			t0 = rw.raw[0]
		}
	}
	for i := range rows {
		rw := &rows[i]
		ns := [4]int64{datasets.Unknown, datasets.Unknown, datasets.Unknown, datasets.Unknown}
		for k := range ns {
			if rw.have[k] {
				v, ok := secondsToNs(rw.raw[k] - t0)
				if !ok {
					return lineError(in.name, rw.line, "times span more than 9e9 s")
				}
				ns[k] = v
			}
		}
		rw.r.ArrivalNs, rw.r.FirstScheduledNs, rw.r.FirstTokenNs, rw.r.FinishNs = ns[0], ns[1], ns[2], ns[3]
		rw.r.NumPreemptions = int32(datasets.Unknown)
		rw.r.Status = datasets.StatusFinished
		if !rw.have[3] {
			rw.r.Status = datasets.StatusUnfinished
		}
	}
	reordered := 0
	for i := 1; i < len(rows); i++ {
		if rows[i].r.ArrivalNs < rows[i-1].r.ArrivalNs {
			reordered++
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].r.ArrivalNs < rows[j].r.ArrivalNs })
	unfinished := 0
	for _, rw := range rows {
		if rw.r.Status != datasets.StatusFinished {
			unfinished++
		}
		if err := s.addRequest(rw.r); err != nil {
			return err
		}
	}

	if haveArrival {
		s.detail("first_arrival_unix", strconv.FormatFloat(firstArrival, 'f', 6, 64))
	}
	s.detail("clock", "engine monotonic (queued_ts); arrival_time (client wall clock) not used for event times")
	s.detail("t0_monotonic_s", strconv.FormatFloat(t0, 'f', 9, 64))
	s.note("vllm-requests: arrival_ns = queued_ts; first_scheduled_ns = scheduled_ts; first_token_ns = first_token_ts; finish_ns = last_token_ts; all on the engine's monotonic clock relative to the earliest queued_ts; num_preemptions not recorded (-1)")
	if reordered > 0 {
		s.note("rows sorted by arrival_ns: %d rows of the source had a queued_ts earlier than the row before them (data-parallel engines queue independently)", reordered)
	}
	if unfinished > 0 {
		s.note("%d requests have no last_token_ts: status unfinished", unfinished)
	}
	if meta != nil && meta.NumRequests != nil && *meta.NumRequests != len(rows) {
		s.note("meta.json says num_requests=%d, requests.jsonl has %d", *meta.NumRequests, len(rows))
	}
	s.m.Workload = &datasets.Workload{Kind: "trace", Params: map[string]string{"format": "vllm-requests", "requests": strconv.Itoa(len(rows))}}
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
	return nil
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
// Engine, Model, Hardware (from config.json, if present) and Source.Detail.
// A missing meta.json is noted, not an error.
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
	s.detail("meta_sha256", sha256Hex(b))
	kw := meta.EngineKwargs
	model := meta.Model
	if model == "" {
		model, _ = kwString(kw, "model")
	}
	if meta.VLLMVersion != "" {
		s.detail("vllm_version", meta.VLLMVersion)
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
	for _, k := range []string{"tensor_parallel_size", "data_parallel_size", "enable_expert_parallel", "dtype", "kv_cache_dtype", "seed"} {
		if raw, ok := kw[k]; ok && !isNull(raw) {
			s.detail(k, strings.Trim(string(raw), `"`))
		}
	}
	eng := &datasets.EngineConfig{BlockSize: vllmDefaultBlockSize, PrefixCaching: vllmDefaultPrefix, ChunkedPrefill: vllmDefaultChunked}
	var bad []string
	setInt := func(key string, dst *int) {
		raw, ok := kw[key]
		if !ok || isNull(raw) {
			return
		}
		v, err := strconv.Atoi(string(raw))
		if err != nil || v < 0 {
			bad = append(bad, key)
			return
		}
		*dst = v
	}
	setBool := func(key string, dst *bool) {
		raw, ok := kw[key]
		if !ok || isNull(raw) {
			return
		}
		v, err := strconv.ParseBool(string(raw))
		if err != nil {
			bad = append(bad, key)
			return
		}
		*dst = v
	}
	setInt("max_num_seqs", &eng.MaxNumSeqs)
	setInt("max_num_batched_tokens", &eng.MaxNumBatchedTokens)
	setInt("max_model_len", &eng.MaxModelLen)
	setInt("block_size", &eng.BlockSize)
	setInt("num_gpu_blocks_override", &eng.NumGPUBlocks)
	setInt("long_prefill_token_threshold", &eng.LongPrefillTokenThreshold)
	setBool("enable_prefix_caching", &eng.PrefixCaching)
	setBool("enable_chunked_prefill", &eng.ChunkedPrefill)
	setBool("async_scheduling", &eng.AsyncScheduling)
	if len(bad) > 0 {
		return nil, fmt.Errorf("meta.json: engine_kwargs %s: not a valid value", strings.Join(bad, ", "))
	}
	s.m.Engine = eng
	var assumed []string
	for _, k := range []string{"block_size", "enable_prefix_caching", "enable_chunked_prefill"} {
		if raw, ok := kw[k]; !ok || isNull(raw) {
			assumed = append(assumed, k)
		}
	}
	if len(assumed) > 0 {
		s.note("engine: %s not in meta.json engine_kwargs; vLLM 0.19 defaults assumed (block_size %d, prefix caching on, chunked prefill on)",
			strings.Join(assumed, ", "), vllmDefaultBlockSize)
	}
	if raw, ok := kw["max_model_len"]; !ok || isNull(raw) {
		s.note("engine: max_model_len not set in engine_kwargs (vLLM took it from the model config): recorded as 0")
	}
	if _, ok := kw["async_scheduling"]; !ok {
		s.note("engine: async_scheduling not recorded in meta.json; recorded as false")
	}
	if model != "" {
		s.m.Model = &datasets.ModelShape{Name: model}
		if dt, ok := kwString(kw, "dtype"); ok {
			s.m.Model.DType = dt
		}
		if raw, ok := kw["tensor_parallel_size"]; ok {
			s.m.Model.TensorParallel, _ = strconv.Atoi(string(raw))
		}
		s.note("model: name and dtype only; layer shapes are not in the source")
	}
	readLLMServingSimConfig(in, s)
	return &meta, nil
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
