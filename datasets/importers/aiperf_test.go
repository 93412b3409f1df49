package importers

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

// The documented records (testdata/aiperf/ATTRIBUTION.md): a successful request
// and a cancelled one.
func TestAIPerfRecords(t *testing.T) {
	rows, s, err := parseRequests("aiperf", readFile(t, "testdata/aiperf/profile_export.jsonl"), nil)
	require.NoError(t, err)
	checkRequests(t, rows, true)
	require.Equal(t, []datasets.Request{
		{ReqID: "7609a2e7-aa53-4ab1-98f4-f35ecafefd25", ArrivalNs: 0, PromptTokens: 550, OutputTokens: 9, FirstScheduledNs: -1,
			FirstTokenNs: 4_898_437, FinishNs: 1759813207838764604 - 1759813207532900363, NumPreemptions: -1, Status: "finished"},
		{ReqID: "c35e4b1b-6775-4750-b875-94cd68e5ec15", ArrivalNs: 1759879161119147826 - 1759813207532900363, PromptTokens: 550,
			FirstScheduledNs: -1, FirstTokenNs: -1, FinishNs: -1, NumPreemptions: -1, Status: "aborted"},
	}, rows)
	require.Equal(t, "1759813207532900363", s.m.Source.Detail["first_request_start_ns"])
	require.Contains(t, s.m.Notes, "1 records with an error (1 cancelled): status aborted")
}

func TestAIPerfParsing(t *testing.T) {
	rec := func(id string, start, end int64, metrics string) string {
		return `{"metadata": {"session_num": 1, "x_request_id": "` + id + `", "request_start_ns": ` + itoa(start) + `, "request_end_ns": ` + itoa(end) +
			`, "worker_id": "w", "benchmark_phase": "profiling"}, "metrics": {` + metrics + `}, "error": null}` + "\n"
	}
	const m = `"input_sequence_length": {"value": 10, "unit": "tokens"}, "output_sequence_length": {"value": 4, "unit": "tokens"}`
	tests := []struct {
		name, in string
		want     []datasets.Request
		note     string
		wantErr  string
	}{
		{name: "completion order, units", in: rec("b", 3_000, 9_000, m+`, "time_to_first_token": {"value": 2, "unit": "us"}`) +
			rec("a", 1_000, 8_000, m+`, "time_to_first_token": {"value": 0.000003, "unit": "sec"}`),
			want: []datasets.Request{
				{ReqID: "a", ArrivalNs: 0, PromptTokens: 10, OutputTokens: 4, FirstScheduledNs: -1, FirstTokenNs: 3_000, FinishNs: 7_000, NumPreemptions: -1, Status: "finished"},
				{ReqID: "b", ArrivalNs: 2_000, PromptTokens: 10, OutputTokens: 4, FirstScheduledNs: -1, FirstTokenNs: 4_000, FinishNs: 8_000, NumPreemptions: -1, Status: "finished"},
			}, note: "rows sorted by arrival_ns: 1 rows of the source arrived before the row above them (AIPerf writes records as they complete)"},
		{name: "warmup skipped", in: strings.Replace(rec("w", 1, 2, m), "profiling", "warmup", 1) + rec("a", 5, 6, m),
			want: []datasets.Request{{ReqID: "a", PromptTokens: 10, OutputTokens: 4, FirstScheduledNs: -1, FirstTokenNs: -1, FinishNs: 1, NumPreemptions: -1, Status: "finished"}},
			note: "1 warmup records skipped"},
		{name: "end before start", in: rec("a", 5, 4, m), wantErr: "in:1: request end 4 is earlier than its start 5"},
		{name: "ttft too long", in: rec("a", 5, 6, m+`, "time_to_first_token": {"value": 3, "unit": "ns"}`), wantErr: "in:1: metrics.time_to_first_token 3 ns is longer than the request (1 ns)"},
		{name: "bad unit", in: rec("a", 5, 60, m+`, "time_to_first_token": {"value": 3, "unit": "tokens"}`), wantErr: `in:1: metrics.time_to_first_token: unit "tokens" is not a time unit`},
		{name: "bad count", in: rec("a", 5, 6, `"input_sequence_length": {"value": 1.5, "unit": "tokens"}`), wantErr: `in:1: metrics.input_sequence_length: "1.5" is not an integer`},
		{name: "duplicate id", in: rec("a", 5, 6, m) + rec("a", 7, 8, m), wantErr: `in:2: request id "a" already used on line 1`},
		{name: "no metadata", in: `{"metrics": {}}`, wantErr: "in:1: no metadata (is this an AIPerf profile_export.jsonl?)"},
		{name: "no start", in: `{"metadata": {"x_request_id": "a"}, "metrics": {}}`, wantErr: "in:1: no start time: want metadata.request_start_ns (or metadata.timestamp_ns)"},
		{name: "empty", in: "\n", wantErr: "in: no profiling records"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := requestCase(t, "aiperf", tt.in, nil, tt.want, tt.wantErr)
			if s != nil && tt.note != "" {
				require.Contains(t, s.m.Notes, tt.note)
			}
		})
	}
}

// AIPerf's own example export (testdata/aiperf-example/ATTRIBUTION.md), in
// the newer schema: timestamp_ns, ttft, max_response_timestamp, and
// cancelled requests as error records without lengths.
func TestAIPerfExampleExport(t *testing.T) {
	rows, s, err := parseRequests("aiperf", readFile(t, "testdata/aiperf-example/profile_export_head20.jsonl"), nil)
	require.NoError(t, err)
	checkRequests(t, rows, true)
	require.Len(t, rows, 20)
	const t0 = 1759522419154568925
	byID := map[string]datasets.Request{}
	finished := 0
	for _, r := range rows {
		byID[r.ReqID] = r
		if r.Status == datasets.StatusFinished {
			finished++
		}
	}
	require.Equal(t, 9, finished)
	require.Equal(t, datasets.Request{ReqID: "1ed40a0d-e708-434d-bb8e-fb1b44cb8717", ArrivalNs: 1759522419159192408 - t0,
		PromptTokens: 550, OutputTokens: 193, FirstScheduledNs: -1, FirstTokenNs: 1759522419159192408 - t0 + 1_680_543_782,
		FinishNs: 1759522427096160677 - t0, NumPreemptions: -1, Status: "finished"}, byID["1ed40a0d-e708-434d-bb8e-fb1b44cb8717"])
	require.Equal(t, datasets.Request{ReqID: "c087da26-5552-4785-958a-cad75c7b22de", ArrivalNs: 1759522419154829652 - t0,
		FirstScheduledNs: -1, FirstTokenNs: -1, FinishNs: -1, NumPreemptions: -1, Status: "aborted"}, byID["c087da26-5552-4785-958a-cad75c7b22de"])
	require.Contains(t, s.m.Notes, "11 records with an error (11 cancelled): status aborted")
}

// Both schemas, record by record: where the start, the end and the time to
// first token come from in each, and what a record lacking them says.
func TestAIPerfSchemas(t *testing.T) {
	const lens = `"input_sequence_length": {"value": 10, "unit": "tokens"}, "output_sequence_length": {"value": 4, "unit": "tokens"}`
	fin := func(id string, arr, first, finish int64) datasets.Request {
		return datasets.Request{ReqID: id, ArrivalNs: arr, PromptTokens: 10, OutputTokens: 4, FirstScheduledNs: -1,
			FirstTokenNs: first, FinishNs: finish, NumPreemptions: -1, Status: "finished"}
	}
	tests := []struct {
		name, in string
		want     []datasets.Request
		wantErr  string
	}{
		{name: "older: request_start_ns, request_end_ns, time_to_first_token",
			in:   `{"metadata": {"x_request_id": "a", "request_start_ns": 100, "request_end_ns": 900, "benchmark_phase": "profiling"}, "metrics": {` + lens + `, "time_to_first_token": {"value": 0.2, "unit": "us"}}, "error": null}`,
			want: []datasets.Request{fin("a", 0, 200, 800)}},
		{name: "newer: timestamp_ns, max_response_timestamp, ttft",
			in:   `{"metadata": {"x_request_id": "a", "timestamp_ns": 100, "credit_phase": "profiling"}, "metrics": {` + lens + `, "ttft": {"value": 300, "unit": "ns"}, "request_latency": {"value": 1, "unit": "us"}, "max_response_timestamp": {"value": 1000, "unit": "ns"}}, "error": null}`,
			want: []datasets.Request{fin("a", 0, 300, 900)}},
		{name: "newer: request_latency alone gives the end",
			in:   `{"metadata": {"x_request_id": "a", "timestamp_ns": 100, "credit_phase": "profiling"}, "metrics": {` + lens + `, "request_latency": {"value": 0.5, "unit": "us"}}, "error": null}`,
			want: []datasets.Request{fin("a", 0, -1, 500)}},
		{name: "newer: warmup credit phase skipped",
			in: `{"metadata": {"x_request_id": "w", "timestamp_ns": 1, "credit_phase": "warmup"}, "metrics": {}, "error": null}` + "\n" +
				`{"metadata": {"x_request_id": "a", "timestamp_ns": 100}, "metrics": {` + lens + `, "request_latency": {"value": 5, "unit": "ns"}}, "error": null}`,
			want: []datasets.Request{fin("a", 0, -1, 5)}},
		{name: "newer: cancelled, no lengths, no end",
			in:   `{"metadata": {"x_request_id": "a", "timestamp_ns": 100}, "metrics": {"error_request_count": {"value": 1, "unit": "requests"}}, "error": {"code": 499, "type": "RequestCancellationError", "message": "cancelled"}}`,
			want: []datasets.Request{{ReqID: "a", FirstScheduledNs: -1, FirstTokenNs: -1, FinishNs: -1, NumPreemptions: -1, Status: "aborted"}}},
		{name: "newer: no end", in: `{"metadata": {"x_request_id": "a", "timestamp_ns": 100}, "metrics": {` + lens + `}, "error": null}`,
			wantErr: "in:1: no end time: want metadata.request_end_ns, metrics.max_response_timestamp or metrics.request_latency"},
		{name: "newer: end before start", in: `{"metadata": {"x_request_id": "a", "timestamp_ns": 100}, "metrics": {"max_response_timestamp": {"value": 50, "unit": "ns"}}, "error": null}`,
			wantErr: "in:1: request end 50 is earlier than its start 100"},
		{name: "newer: bad max_response_timestamp", in: `{"metadata": {"x_request_id": "a", "timestamp_ns": 100}, "metrics": {"max_response_timestamp": {"value": "x", "unit": "ns"}}, "error": null}`,
			wantErr: "in:1: metrics.max_response_timestamp:"},
		{name: "newer: bad request_latency unit", in: `{"metadata": {"x_request_id": "a", "timestamp_ns": 100}, "metrics": {"request_latency": {"value": 5, "unit": "tokens"}}, "error": null}`,
			wantErr: `in:1: metrics.request_latency: unit "tokens" is not a time unit`},
		{name: "newer: ttft longer than the request", in: `{"metadata": {"x_request_id": "a", "timestamp_ns": 100}, "metrics": {"ttft": {"value": 9, "unit": "ns"}, "request_latency": {"value": 5, "unit": "ns"}}, "error": null}`,
			wantErr: "in:1: metrics.ttft 9 ns is longer than the request (5 ns)"},
		{name: "negative start", in: `{"metadata": {"x_request_id": "a", "timestamp_ns": -1}, "metrics": {}, "error": null}`,
			wantErr: "in:1: start time -1 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { requestCase(t, "aiperf", tt.in+"\n", nil, tt.want, tt.wantErr) })
	}
}
