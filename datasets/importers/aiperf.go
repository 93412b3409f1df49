package importers

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/steplab/steplab/datasets"
)

// aiperfRecord is one line of AIPerf's profile_export.jsonl, in either of
// the two schemas AIPerf has written (MetricRecordInfo and
// MetricRecordMetadata in aiperf/common/models/record_models.py, written by
// aiperf/post_processors/record_export_results_processor.py):
//
//   - @ db4f6397 (docs/tutorials/working-with-profile-exports.md):
//     metadata.request_start_ns and request_end_ns, benchmark_phase,
//     was_cancelled; metrics.time_to_first_token.
//   - @ 7c31f579 (examples/artifacts/run1/profile_export.jsonl):
//     metadata.timestamp_ns (the request's start) and credit_phase;
//     metrics.ttft, request_latency and max_response_timestamp (the last
//     response, epoch ns); a cancelled request is an error record (code 499)
//     with no lengths.
//
// The metadata's times are wall-clock epoch nanoseconds (time.time_ns()); the
// metrics are in their display units, each with its unit.
type aiperfRecord struct {
	Metadata *struct {
		SessionNum     *int64  `json:"session_num"`
		XRequestID     *string `json:"x_request_id"`
		TurnIndex      *int64  `json:"turn_index"`
		RequestStartNs *int64  `json:"request_start_ns"`
		RequestEndNs   *int64  `json:"request_end_ns"`
		TimestampNs    *int64  `json:"timestamp_ns"`
		WorkerID       string  `json:"worker_id"`
		BenchmarkPhase string  `json:"benchmark_phase"`
		CreditPhase    string  `json:"credit_phase"`
		WasCancelled   bool    `json:"was_cancelled"`
	} `json:"metadata"`
	Metrics map[string]aiperfMetric `json:"metrics"`
	Error   *struct {
		Code    *int   `json:"code"`
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// times returns the record's start and end (epoch ns; end -1 where a failed
// record has none) from whichever schema it is in.
func (rec *aiperfRecord) times() (start, end int64, err error) {
	md := rec.Metadata
	switch {
	case md != nil && md.RequestStartNs != nil:
		start = *md.RequestStartNs
	case md != nil && md.TimestampNs != nil:
		start = *md.TimestampNs
	default:
		return 0, 0, errors.New("no start time: want metadata.request_start_ns (or metadata.timestamp_ns) (is this an AIPerf profile_export.jsonl?)")
	}
	if start < 0 {
		return 0, 0, fmt.Errorf("start time %d is negative", start)
	}
	end = -1
	switch m, ok := rec.Metrics["max_response_timestamp"]; {
	case md.RequestEndNs != nil:
		end = *md.RequestEndNs
	case ok && !isNull(m.Value):
		if end, err = parseCount(string(m.Value)); err != nil {
			return 0, 0, fmt.Errorf("metrics.max_response_timestamp: %v", err)
		}
	default:
		if m, ok := rec.Metrics["request_latency"]; ok && !isNull(m.Value) {
			d, err := aiperfDuration(m)
			if err != nil {
				return 0, 0, fmt.Errorf("metrics.request_latency: %v", err)
			}
			end = start + d
		}
	}
	if end == -1 && rec.Error == nil && !md.WasCancelled {
		return 0, 0, errors.New("no end time: want metadata.request_end_ns, metrics.max_response_timestamp or metrics.request_latency")
	}
	if end != -1 && end < start {
		return 0, 0, fmt.Errorf("request end %d is earlier than its start %d", end, start)
	}
	return start, end, nil
}

// phase is the record's benchmark phase in either schema.
func (rec *aiperfRecord) phase() string {
	return orDefault(rec.Metadata.BenchmarkPhase, rec.Metadata.CreditPhase)
}

type aiperfMetric struct {
	Value json.RawMessage `json:"value"`
	Unit  string          `json:"unit"`
}

// aiperfTimeUnits are AIPerf's MetricTimeUnit tags (aiperf/common/enums/metric_enums.py).
var aiperfTimeUnits = map[string]float64{"ns": 1, "us": 1e3, "ms": 1e6, "sec": 1e9}

// aiperfRow is one record on its way to a row: times are epoch ns.
type aiperfRow struct {
	r     datasets.Request
	start int64
	end   int64 // -1: none
	ttft  int64 // -1: none
}

// runAIPerf reads AIPerf's per-request export, either schema (see
// aiperfRecord). Per record: arrival_ns = the start relative to the
// earliest; first_token_ns = arrival + time to first token; finish_ns = the
// end (the last response); prompt_tokens = input_sequence_length (error_isl
// for a failed request), output_tokens = output_sequence_length (else
// output_token_count). A record with an error (cancelled ones included) is
// aborted with no times. Records of the warmup phase are skipped. The
// records are written in completion order, so the rows are sorted by
// arrival (stably). req_id is x_request_id (else session_num-turn_index).
// Not kept: inter_chunk_latency (the per-chunk list), request_ack_ns (the
// server's HTTP acknowledgement, not a scheduling event), the per-record
// derived metrics (inter_token_latency, throughputs), worker ids (counted).
func runAIPerf(in *input, s *sink) error {
	var rows []aiperfRow
	seen := map[string]int{}
	workers := map[string]bool{}
	var warmup, failed, cancelled int64
	err := eachJSONLine(in, func(rec *aiperfRecord, lineNo int) error {
		if rec.Metadata == nil {
			return lineError(in.name, lineNo, "no metadata (is this an AIPerf profile_export.jsonl?)")
		}
		if rec.phase() == "warmup" {
			warmup++
			return nil
		}
		rw, err := rec.row(lineNo)
		if err != nil {
			return lineError(in.name, lineNo, "%v", err)
		}
		if prev, dup := seen[rw.r.ReqID]; dup {
			return lineError(in.name, lineNo, "request id %q already used on line %d", rw.r.ReqID, prev)
		}
		seen[rw.r.ReqID] = lineNo
		if rec.Metadata.WorkerID != "" {
			workers[rec.Metadata.WorkerID] = true
		}
		if rw.r.Status == datasets.StatusAborted {
			failed++
			if rec.Metadata.WasCancelled || rec.Error != nil && rec.Error.Code != nil && *rec.Error.Code == 499 {
				cancelled++
			}
		}
		rows = append(rows, rw)
		return nil
	})
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		return fmt.Errorf("%s: no profiling records", in.name)
	}
	t0 := rows[0].start
	for _, rw := range rows {
		t0 = min(t0, rw.start)
	}
	for i := range rows {
		rw := &rows[i]
		rw.r.ArrivalNs = rw.start - t0
		if rw.r.Status == datasets.StatusFinished {
			rw.r.FinishNs = rw.end - t0
			if rw.ttft >= 0 {
				rw.r.FirstTokenNs = rw.r.ArrivalNs + rw.ttft
			}
		}
	}
	if err := addSortedRequests(rows, func(rw aiperfRow) int64 { return rw.start }, func(rw aiperfRow) datasets.Request { return rw.r }, s,
		"AIPerf writes records as they complete"); err != nil {
		return err
	}
	s.detail("first_request_start_ns", strconv.FormatInt(t0, 10))
	s.detail("workers", strconv.Itoa(len(workers)))
	s.m.Workload = &datasets.Workload{Kind: "trace", Params: map[string]string{"format": "aiperf", "requests": strconv.Itoa(len(rows))}}
	s.note("aiperf: arrival_ns = request_start_ns (timestamp_ns) relative to the earliest; first_token_ns = arrival + time_to_first_token (ttft); finish_ns = request_end_ns (max_response_timestamp, else start + request_latency); client-side wall-clock times (HTTP streaming), no engine queue or schedule times (first_scheduled_ns -1)")
	s.note("aiperf: not kept: inter_chunk_latency lists, request_ack_ns, per-record derived metrics")
	if failed > 0 {
		s.note("%d records with an error (%d cancelled): status aborted", failed, cancelled)
	}
	if warmup > 0 {
		s.note("%d warmup records skipped", warmup)
	}
	return nil
}

// row converts one profiling record (the caller has checked its metadata).
func (rec *aiperfRecord) row(lineNo int) (aiperfRow, error) {
	md := rec.Metadata
	start, end, err := rec.times()
	if err != nil {
		return aiperfRow{}, err
	}
	id := fmt.Sprintf("line-%d", lineNo)
	switch {
	case md.XRequestID != nil && *md.XRequestID != "":
		id = *md.XRequestID
	case md.SessionNum != nil:
		id = strconv.FormatInt(*md.SessionNum, 10)
		if md.TurnIndex != nil {
			id += "-" + strconv.FormatInt(*md.TurnIndex, 10)
		}
	}
	rw := aiperfRow{start: start, end: end, ttft: -1,
		r: datasets.Request{ReqID: id, FirstScheduledNs: datasets.Unknown, FirstTokenNs: datasets.Unknown, FinishNs: datasets.Unknown,
			NumPreemptions: int32(datasets.Unknown), Status: datasets.StatusFinished}}
	if rw.r.PromptTokens, err = rec.count("input_sequence_length", "error_isl"); err != nil {
		return rw, err
	}
	if rw.r.OutputTokens, err = rec.count("output_sequence_length", "output_token_count"); err != nil {
		return rw, err
	}
	if rec.Error != nil || md.WasCancelled {
		rw.r.Status = datasets.StatusAborted
		return rw, nil
	}
	for _, name := range []string{"time_to_first_token", "ttft"} {
		m, ok := rec.Metrics[name]
		if !ok {
			continue
		}
		d, err := aiperfDuration(m)
		if err != nil {
			return rw, fmt.Errorf("metrics.%s: %v", name, err)
		}
		if d > end-start {
			return rw, fmt.Errorf("metrics.%s %d ns is longer than the request (%d ns)", name, d, end-start)
		}
		rw.ttft = d
		break
	}
	return rw, nil
}

// count is the first of the named token-count metrics the record has (0
// when none).
func (rec *aiperfRecord) count(names ...string) (int64, error) {
	for _, n := range names {
		if m, ok := rec.Metrics[n]; ok && !isNull(m.Value) {
			v, err := parseCount(string(m.Value))
			if err != nil {
				return 0, fmt.Errorf("metrics.%s: %v", n, err)
			}
			return v, nil
		}
	}
	return 0, nil
}

// aiperfDuration converts a time metric in its unit to nanoseconds.
func aiperfDuration(m aiperfMetric) (int64, error) {
	k, ok := aiperfTimeUnits[m.Unit]
	if !ok {
		return 0, fmt.Errorf("unit %q is not a time unit (want ns, us, ms or sec)", m.Unit)
	}
	v, err := strconv.ParseFloat(string(m.Value), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v*k > 9e18 {
		return 0, errors.New(string(m.Value) + " is not a duration")
	}
	return int64(math.Round(v * k)), nil
}
