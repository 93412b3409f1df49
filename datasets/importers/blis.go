package importers

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/internal/yamldoc"
)

// BLISTraceHeader is the YAML header of a BLIS (inference-sim) TraceV2
// trace, the fields steplab reads and writes (TraceHeader in
// sim/workload/tracev2.go of inference-sim/inference-sim, read at
// f90a1e3a). BLIS writes the header as <prefix>.yaml beside the data
// <prefix>.csv.
type BLISTraceHeader struct {
	Version        int              `yaml:"trace_version"`
	TimeUnit       string           `yaml:"time_unit"`
	CreatedAt      string           `yaml:"created_at,omitempty"`
	Mode           string           `yaml:"mode"`
	WarmUpRequests int              `yaml:"warm_up_requests"`
	WorkloadSeed   *int64           `yaml:"workload_seed,omitempty"`
	WorkloadSpec   string           `yaml:"workload_spec,omitempty"`
	Server         *BLISTraceServer `yaml:"server,omitempty"`
}

// BLISTraceServer is TraceServerConfig of the header.
type BLISTraceServer struct {
	Type                 string  `yaml:"type,omitempty"`
	Model                string  `yaml:"model,omitempty"`
	TensorParallel       int     `yaml:"tensor_parallel,omitempty"`
	MaxNumSeqs           int     `yaml:"max_num_seqs,omitempty"`
	BlockSize            int     `yaml:"block_size,omitempty"`
	GPUMemoryUtilization float64 `yaml:"gpu_memory_utilization,omitempty"`
	MaxModelLen          int64   `yaml:"max_model_len,omitempty"`
}

// BLISColumns are the data columns every TraceV2 CSV has, in BLIS's order
// (traceV2Columns). BLIS inserts vllm_priority after slo_class and
// slo_target_us after deadline_us, and appends x_request_id, adapter and
// think_time_us, only when a record uses them; steplab reads columns by
// name.
var BLISColumns = []string{
	"request_id", "client_id", "tenant_id", "slo_class", "session_id", "round_index",
	"prefix_group", "prefix_length", "streaming", "input_tokens", "output_tokens",
	"text_tokens", "image_tokens", "audio_tokens", "video_tokens", "reason_ratio",
	"model", "deadline_us", "server_input_tokens",
	"arrival_time_us", "send_time_us", "first_chunk_time_us", "last_chunk_time_us",
	"num_chunks", "status", "error_message", "finish_reason",
}

// BLISHashBlockTokens is the tokens per prefix hash of a request whose
// prompt starts with a BLIS prefix group: the group's shared prefix is
// written as one hash id per full block (an engine block size must divide
// it; vLLM's default block is 16 tokens).
const BLISHashBlockTokens = 16

// BLISGroupHashShift places a prefix group's number in the high bits of its
// hash ids (group g, block k: g<<BLISGroupHashShift | k), so that export
// can tell the groups apart again.
const BLISGroupHashShift = 24

// runBLIS reads a BLIS TraceV2 trace: the data CSV, and the header YAML
// beside it (<prefix>.yaml for <prefix>.csv; without one, microseconds are
// assumed and noted). It follows BLIS's own loader (LoadTraceV2 and
// LoadTraceV2Requests in sim/workload/replay.go and tracev2.go @ f90a1e3a):
//
//   - The engine saw a request at send_time_us (after any client
//     concurrency wait), arrival_time_us where send_time_us is 0:
//     arrival_ns is that time relative to the earliest.
//   - prompt_tokens is prefix_length + input_tokens for a request in a
//     prefix_group (input_tokens counts the suffix only), else
//     server_input_tokens when recorded (> 0), else input_tokens.
//   - first_token_ns and finish_ns are first_chunk_time_us and
//     last_chunk_time_us (0: not reached) on the same clock.
//   - status ok is finished (unfinished without a last chunk time),
//     timeout and error aborted, anything else ("incomplete") unfinished.
//   - A prefix group's shared prefix becomes prefix_hash_ids, one id per
//     full BLISHashBlockTokens block (see BLISGroupHashShift), so requests
//     of a group share their hash prefix; a partial last block is not
//     hashed.
//
// Not kept: client, tenant, SLO class, priority, session and round,
// streaming, modality token counts, reason ratio, deadlines, SLO targets,
// num_chunks, error messages, finish reasons, LoRA adapters, think times;
// the columns with non-default values are listed in a note.
func runBLIS(in *input, s *sink) error {
	hdr, err := readBLISHeader(in, s)
	if err != nil {
		return err
	}
	unit := int64(1000) // microseconds
	switch hdr.TimeUnit {
	case "", "microseconds", "us":
	default:
		return fmt.Errorf("%s: time_unit %q is not supported (BLIS writes microseconds)", blisHeaderName(in.name), hdr.TimeUnit)
	}
	c, err := newCSVRows(in.name, in, "request_id", "prefix_group", "prefix_length", "input_tokens", "output_tokens", "arrival_time_us")
	if err != nil {
		return err
	}
	dropped := map[string]bool{}
	groups := map[string]int64{}
	var rows []blisRow
	seen := map[string]int{}
	for c.scan() {
		rw, err := readBLISRow(c, seen)
		if err != nil {
			return err
		}
		if _, ok := groups[rw.prefixGroup]; rw.prefixGroup != "" && !ok {
			groups[rw.prefixGroup] = int64(len(groups))
		}
		blisDropped(c, dropped)
		rows = append(rows, rw)
	}
	if c.err != nil {
		return c.err
	}
	if len(rows) == 0 {
		return fmt.Errorf("%s: no requests", in.name)
	}
	noLast := placeBLISRows(rows, groups, unit)
	if err := addSortedRequests(rows, func(rw blisRow) int64 { return rw.r.ArrivalNs }, func(rw blisRow) datasets.Request { return rw.r }, s,
		"BLIS writes records in request_id order"); err != nil {
		return err
	}
	params := map[string]string{"format": "blis", "requests": strconv.Itoa(len(rows)), "mode": hdr.Mode}
	if len(groups) > 0 {
		params[datasets.ParamHashBlockSize] = strconv.Itoa(BLISHashBlockTokens)
		params["prefix_groups"] = strconv.Itoa(len(groups))
	}
	s.m.Workload = &datasets.Workload{Kind: "trace", Params: params}
	if hdr.WorkloadSeed != nil && *hdr.WorkloadSeed >= 0 {
		s.m.Workload.Seed = uint64(*hdr.WorkloadSeed)
	}
	s.note("blis: arrival_ns = send_time_us (arrival_time_us where 0) relative to the earliest; first_token_ns and finish_ns from first_chunk_time_us and last_chunk_time_us; prompt_tokens = prefix_length + input_tokens in a prefix group, else server_input_tokens when recorded, else input_tokens")
	if len(groups) > 0 {
		s.note("blis: %d prefix groups written as prefix_hash_ids, one per full %d-token block of the group's prefix", len(groups), BLISHashBlockTokens)
	}
	if len(dropped) > 0 {
		s.note("blis: columns with values not kept: %s", strings.Join(sortedKeys(dropped), ", "))
	}
	if noLast > 0 {
		s.note("blis: %d requests with status ok but no last_chunk_time_us: status unfinished", noLast)
	}
	return nil
}

// blisRow is one record of a BLIS trace, its times still in the trace's
// unit on the trace's clock.
type blisRow struct {
	r                        datasets.Request
	inject, first, last      int64
	prefixGroup              string
	prefixLen, suffix, total int64
}

// readBLISRow reads the record c is on (request ids unique in seen): its
// token counts, injection and chunk times and status.
func readBLISRow(c *csvRows, seen map[string]int) (blisRow, error) {
	field := c.optional
	num := func(col string) (int64, error) {
		v := field(col)
		if v == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1<<53 {
			return 0, c.errorf("%s: %q is not a non-negative integer", col, v)
		}
		return n, nil
	}
	var v [8]int64
	for k, col := range []string{"prefix_length", "input_tokens", "output_tokens", "server_input_tokens",
		"arrival_time_us", "send_time_us", "first_chunk_time_us", "last_chunk_time_us"} {
		var err error
		if v[k], err = num(col); err != nil {
			return blisRow{}, err
		}
	}
	id := field("request_id")
	if id == "" {
		return blisRow{}, c.errorf("request_id is empty")
	}
	if prev, dup := seen[id]; dup {
		return blisRow{}, c.errorf("request_id %s already used on line %d", id, prev)
	}
	seen[id] = c.line
	rw := blisRow{prefixGroup: field("prefix_group"), prefixLen: v[0], suffix: v[1], first: v[6], last: v[7],
		r: datasets.Request{ReqID: id, OutputTokens: v[2], FirstScheduledNs: datasets.Unknown, FirstTokenNs: datasets.Unknown,
			FinishNs: datasets.Unknown, NumPreemptions: int32(datasets.Unknown)}}
	rw.inject = v[4]
	if v[5] > 0 {
		rw.inject = v[5]
	}
	switch {
	case rw.prefixGroup != "":
		rw.total = v[0] + v[1]
	case v[3] > 0:
		rw.total = v[3]
	default:
		rw.total = v[1]
	}
	rw.r.PromptTokens = rw.total
	switch field("status") {
	case "ok":
		rw.r.Status = datasets.StatusFinished
	case "timeout", "error":
		rw.r.Status = datasets.StatusAborted
	default:
		rw.r.Status = datasets.StatusUnfinished
	}
	if (rw.first > 0 && rw.first < rw.inject) || (rw.last > 0 && rw.last < rw.first) {
		return blisRow{}, c.errorf("chunk times %d, %d are not in order after the request's injection at %d", rw.first, rw.last, rw.inject)
	}
	return rw, nil
}

// blisDropped adds to dropped the columns not kept that have a value other
// than their default in the record c is on.
func blisDropped(c *csvRows, dropped map[string]bool) {
	field := c.optional
	for _, col := range []string{"client_id", "tenant_id", "slo_class", "vllm_priority", "session_id", "deadline_us", "slo_target_us",
		"image_tokens", "audio_tokens", "video_tokens", "error_message", "adapter", "think_time_us"} {
		if x := field(col); x != "" && x != "0" {
			dropped[col] = true
		}
	}
	if x := field("round_index"); x != "" && x != "0" {
		dropped["round_index"] = true
	}
	if x := field("reason_ratio"); x != "" && x != "0" && x != "0.0" {
		dropped["reason_ratio"] = true
	}
}

// placeBLISRows sets every row's times in ns from the earliest injection
// and its prefix hash ids (group numbers from groups), and returns how
// many rows of status ok have no last chunk time (made unfinished).
func placeBLISRows(rows []blisRow, groups map[string]int64, unit int64) (noLast int) {
	t0 := rows[0].inject
	for _, rw := range rows {
		t0 = min(t0, rw.inject)
	}
	for i := range rows {
		rw := &rows[i]
		rw.r.ArrivalNs = (rw.inject - t0) * unit
		if rw.first > 0 {
			rw.r.FirstTokenNs = (rw.first - t0) * unit
		}
		if rw.r.Status == datasets.StatusFinished {
			if rw.last > 0 {
				rw.r.FinishNs = (rw.last - t0) * unit
			} else {
				rw.r.Status = datasets.StatusUnfinished
				noLast++
			}
		}
		if rw.prefixGroup != "" {
			g := groups[rw.prefixGroup]
			for k := int64(0); k < rw.prefixLen/BLISHashBlockTokens; k++ {
				rw.r.PrefixHashIDs = append(rw.r.PrefixHashIDs, g<<BLISGroupHashShift|k)
			}
		}
	}
	return noLast
}

// blisHeaderName is the header file BLIS writes beside a data CSV.
func blisHeaderName(data string) string { return strings.TrimSuffix(data, ".csv") + ".yaml" }

func readBLISHeader(in *input, s *sink) (*BLISTraceHeader, error) {
	name := blisHeaderName(in.name)
	b, err := in.sibling(name)
	if errors.Is(err, fs.ErrNotExist) {
		s.note("no header %s beside %s: times read as microseconds, no engine settings", name, in.name)
		return &BLISTraceHeader{}, nil
	}
	if err != nil {
		return nil, err
	}
	var h BLISTraceHeader
	if err := yamldoc.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if h.Version < 1 || h.Version > 3 {
		return nil, fmt.Errorf("%s: trace_version %d is not supported (this steplab reads BLIS trace versions 1 to 3)", name, h.Version)
	}
	s.detail("trace_version", strconv.Itoa(h.Version))
	s.detail("mode", h.Mode)
	s.detail("header_sha256", sha256Hex(b))
	if h.CreatedAt != "" {
		s.m.Created = h.CreatedAt
	}
	if h.WorkloadSpec != "" {
		s.detail("workload_spec", h.WorkloadSpec)
	}
	if h.WarmUpRequests > 0 {
		s.note("blis: the header says the first %d requests are warm-up; they are imported like the others", h.WarmUpRequests)
	}
	if sv := h.Server; sv != nil {
		if sv.Type != "" {
			s.detail("server_type", sv.Type)
		}
		if sv.Model != "" {
			s.m.Model = &datasets.ModelShape{Name: sv.Model, TensorParallel: sv.TensorParallel}
		}
		if sv.MaxNumSeqs > 0 || sv.BlockSize > 0 || sv.MaxModelLen > 0 {
			s.m.Engine = &datasets.EngineConfig{MaxNumSeqs: sv.MaxNumSeqs, BlockSize: sv.BlockSize, MaxModelLen: int(sv.MaxModelLen),
				GPUMemoryUtilization: sv.GPUMemoryUtilization, TensorParallelSize: sv.TensorParallel}
			s.note("engine: max_num_seqs, block_size, max_model_len and gpu_memory_utilization from the header's server section; the rest is unknown (0)")
		}
	}
	return &h, nil
}
