package importers

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/steplab/steplab/datasets"
)

// aiperfRecord is one line of AIPerf's profile_export.jsonl
// (ai-dynamo/aiperf @ db4f6397: MetricRecordInfo and MetricRecordMetadata
// in aiperf/common/models/record_models.py, written by
// aiperf/post_processors/record_export_results_processor.py; the format is
// described in docs/tutorials/working-with-profile-exports.md). The
// metadata's times are wall-clock epoch nanoseconds (time.time_ns()); the
// metrics are in their display units, each with its unit.
type aiperfRecord struct {
	Metadata *struct {
		SessionNum     *int64  `json:"session_num"`
		XRequestID     *string `json:"x_request_id"`
		TurnIndex      *int64  `json:"turn_index"`
		RequestStartNs *int64  `json:"request_start_ns"`
		RequestEndNs   *int64  `json:"request_end_ns"`
		WorkerID       string  `json:"worker_id"`
		BenchmarkPhase string  `json:"benchmark_phase"`
		WasCancelled   bool    `json:"was_cancelled"`
	} `json:"metadata"`
	Metrics map[string]aiperfMetric `json:"metrics"`
	Error   *struct {
		Code    *int   `json:"code"`
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

type aiperfMetric struct {
	Value json.RawMessage `json:"value"`
	Unit  string          `json:"unit"`
}

// aiperfTimeUnits are AIPerf's MetricTimeUnit tags (aiperf/common/enums/metric_enums.py).
var aiperfTimeUnits = map[string]float64{"ns": 1, "us": 1e3, "ms": 1e6, "sec": 1e9}

// runAIPerf reads AIPerf's per-request export. Per record: arrival_ns =
// request_start_ns relative to the earliest start; first_token_ns = arrival
// + time_to_first_token; finish_ns = request_end_ns (the last response);
// prompt_tokens = input_sequence_length (error_isl for a failed request),
// output_tokens = output_sequence_length (else output_token_count). A record
// with an error (cancelled ones included) is aborted with no times. Records
// of the warmup phase are skipped. The records are written in completion
// order, so the rows are sorted by arrival (stably). req_id is x_request_id
// (else session_num-turn_index). Not kept: inter_chunk_latency (the
// per-chunk list), request_ack_ns (the server's HTTP acknowledgement, not a
// scheduling event), the per-record derived metrics (inter_token_latency,
// throughputs), worker ids (counted).
func runAIPerf(in *input, s *sink) error {
	type row struct {
		r     datasets.Request
		start int64
		end   int64
		ttft  int64 // -1: none
	}
	var rows []row
	seen := map[string]int{}
	workers := map[string]bool{}
	var warmup, failed, cancelled int64
	err := eachJSONLine(in, func(rec *aiperfRecord, lineNo int) error {
		md := rec.Metadata
		if md == nil || md.RequestStartNs == nil || md.RequestEndNs == nil {
			return lineError(in.name, lineNo, "metadata.request_start_ns and metadata.request_end_ns are required (is this an AIPerf profile_export.jsonl?)")
		}
		if md.BenchmarkPhase == "warmup" {
			warmup++
			return nil
		}
		if *md.RequestStartNs < 0 || *md.RequestEndNs < *md.RequestStartNs {
			return lineError(in.name, lineNo, "request_end_ns %d is earlier than request_start_ns %d", *md.RequestEndNs, *md.RequestStartNs)
		}
		id := ""
		switch {
		case md.XRequestID != nil && *md.XRequestID != "":
			id = *md.XRequestID
		case md.SessionNum != nil:
			id = strconv.FormatInt(*md.SessionNum, 10)
			if md.TurnIndex != nil {
				id += "-" + strconv.FormatInt(*md.TurnIndex, 10)
			}
		default:
			id = fmt.Sprintf("line-%d", lineNo)
		}
		if prev, dup := seen[id]; dup {
			return lineError(in.name, lineNo, "request id %q already used on line %d", id, prev)
		}
		seen[id] = lineNo
		if md.WorkerID != "" {
			workers[md.WorkerID] = true
		}
		rw := row{start: *md.RequestStartNs, end: *md.RequestEndNs, ttft: -1,
			r: datasets.Request{ReqID: id, FirstScheduledNs: datasets.Unknown, FirstTokenNs: datasets.Unknown, FinishNs: datasets.Unknown,
				NumPreemptions: int32(datasets.Unknown), Status: datasets.StatusFinished}}
		count := func(names ...string) (int64, error) {
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
		var err error
		if rw.r.PromptTokens, err = count("input_sequence_length", "error_isl"); err != nil {
			return lineError(in.name, lineNo, "%v", err)
		}
		if rw.r.OutputTokens, err = count("output_sequence_length", "output_token_count"); err != nil {
			return lineError(in.name, lineNo, "%v", err)
		}
		if rec.Error != nil || md.WasCancelled {
			rw.r.Status = datasets.StatusAborted
			failed++
			if md.WasCancelled {
				cancelled++
			}
		} else if m, ok := rec.Metrics["time_to_first_token"]; ok {
			d, err := aiperfDuration(m)
			if err != nil {
				return lineError(in.name, lineNo, "metrics.time_to_first_token: %v", err)
			}
			if d > rw.end-rw.start {
				return lineError(in.name, lineNo, "metrics.time_to_first_token %d ns is longer than the request (%d ns)", d, rw.end-rw.start)
			}
			rw.ttft = d
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
	sortRequests(rows, func(rw row) int64 { return rw.start }, s, "AIPerf writes records as they complete")
	for _, rw := range rows {
		if err := s.addRequest(rw.r); err != nil {
			return err
		}
	}
	s.detail("first_request_start_ns", strconv.FormatInt(t0, 10))
	s.detail("workers", strconv.Itoa(len(workers)))
	s.m.Workload = &datasets.Workload{Kind: "trace", Params: map[string]string{"format": "aiperf", "requests": strconv.Itoa(len(rows))}}
	s.note("aiperf: arrival_ns = request_start_ns relative to the earliest; first_token_ns = arrival + time_to_first_token; finish_ns = request_end_ns; client-side wall-clock times (HTTP streaming), no engine queue or schedule times (first_scheduled_ns -1)")
	s.note("aiperf: not kept: inter_chunk_latency lists, request_ack_ns, per-record derived metrics")
	if failed > 0 {
		s.note("%d records with an error (%d cancelled): status aborted", failed, cancelled)
	}
	if warmup > 0 {
		s.note("%d warmup records skipped", warmup)
	}
	return nil
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
