package importers

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

// The first rows of BurstGPT_1.csv (testdata/burstgpt/ATTRIBUTION.md).
func TestBurstGPTRows(t *testing.T) {
	res, d, rows := importRequests(t, "burstgpt", "testdata/burstgpt/BurstGPT_1_rows.csv")
	require.Equal(t, int64(3), res.Rows)
	require.Equal(t, []datasets.Request{
		traceRequest(0, 0, 472, 18),
		traceRequest(1, 40_000_000_000, 1087, 230),
		traceRequest(2, 113_000_000_000, 417, 276),
	}, rows)
	m := d.Manifest
	require.Equal(t, "2", m.Source.Detail["Model.ChatGPT"])
	require.Equal(t, "1", m.Source.Detail["Model.GPT-4"])
	require.Equal(t, "3", m.Source.Detail["Log Type.Conversation log"])
	require.Equal(t, "5", m.Source.Detail["first_timestamp_s"])
	require.Contains(t, m.Notes, "burstgpt: no Elapsed time column: no event times (status not_run)")
}

func TestBurstGPTParsing(t *testing.T) {
	const v3 = "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
	tests := []struct {
		name    string
		in      string
		want    []datasets.Request
		notes   []string
		wantErr string
	}{
		{name: "BurstGPT_3 columns: elapsed time, failure, sessions",
			in: v3 + "0.5,s1,2.25,ChatGPT,100,20,120,Conversation log\n1.5,s1,0,GPT-4,50,0,50,Conversation log\n2,,1,ChatGPT,10,5,16,API log\n",
			want: []datasets.Request{
				{ReqID: "000000", ArrivalNs: 0, PromptTokens: 100, OutputTokens: 20, FirstScheduledNs: -1, FirstTokenNs: -1, FinishNs: 2_250_000_000, Status: "finished"},
				{ReqID: "000001", ArrivalNs: 1_000_000_000, PromptTokens: 50, FirstScheduledNs: -1, FirstTokenNs: -1, FinishNs: -1, Status: "aborted"},
				{ReqID: "000002", ArrivalNs: 1_500_000_000, PromptTokens: 10, OutputTokens: 5, FirstScheduledNs: -1, FirstTokenNs: -1, FinishNs: 2_500_000_000, Status: "finished"},
			},
			notes: []string{"1 requests have 0 response tokens, BurstGPT's mark of a failed request: status aborted",
				"1 rows have a Total tokens that is not Request tokens + Response tokens",
				"Session ID not kept (no session column in requests): about 1 sessions"}},
		{name: "only the required columns", in: "Response tokens,Timestamp,Request tokens\n3,7,9\n",
			want: []datasets.Request{traceRequest(0, 0, 9, 3)}},
		{name: "no header", in: "", wantErr: "in: empty file"},
		{name: "missing column", in: "Timestamp,Model\n1,x\n", wantErr: `in:1: header has no Request tokens column (got "Timestamp,Model"; want Timestamp,Request tokens,Response tokens)`},
		{name: "out of order", in: "Timestamp,Request tokens,Response tokens\n5,1,1\n4,1,1\n", wantErr: "in:3: Timestamp: 4 is earlier than the previous row's 5"},
		{name: "bad count", in: "Timestamp,Request tokens,Response tokens\n5,x,1\n", wantErr: `in:2: Request tokens: "x" is not an integer`},
		{name: "bad time", in: "Timestamp,Request tokens,Response tokens\n-5,1,1\n", wantErr: `in:2: Timestamp: "-5" is not a time in seconds`},
		{name: "bad elapsed", in: v3 + "0,s,x,m,1,1,2,l\n", wantErr: `in:2: Elapsed time: "x" is not a duration in seconds`},
		{name: "short row", in: "Timestamp,Request tokens,Response tokens\n5,1\n", wantErr: "in:2: 2 fields, want at least 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := requestCase(t, "burstgpt", tt.in, nil, tt.want, tt.wantErr)
			if s == nil {
				return
			}
			for _, n := range tt.notes {
				require.Contains(t, s.m.Notes, n)
			}
		})
	}
}
