package importers

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

// The documented records (testdata/aiperf/SOURCE.md): a successful request
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
		{name: "end before start", in: rec("a", 5, 4, m), wantErr: "in:1: request_end_ns 4 is earlier than request_start_ns 5"},
		{name: "ttft too long", in: rec("a", 5, 6, m+`, "time_to_first_token": {"value": 3, "unit": "ns"}`), wantErr: "in:1: metrics.time_to_first_token 3 ns is longer than the request (1 ns)"},
		{name: "bad unit", in: rec("a", 5, 60, m+`, "time_to_first_token": {"value": 3, "unit": "tokens"}`), wantErr: `in:1: metrics.time_to_first_token: unit "tokens" is not a time unit`},
		{name: "bad count", in: rec("a", 5, 6, `"input_sequence_length": {"value": 1.5, "unit": "tokens"}`), wantErr: `in:1: metrics.input_sequence_length: "1.5" is not an integer`},
		{name: "duplicate id", in: rec("a", 5, 6, m) + rec("a", 7, 8, m), wantErr: `in:2: request id "a" already used on line 1`},
		{name: "no metadata", in: `{"metrics": {}}`, wantErr: "in:1: metadata.request_start_ns and metadata.request_end_ns are required"},
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
