package importers

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

func TestMooncakeRealFiles(t *testing.T) {
	tests := []struct {
		file         string
		rows         int
		lastArrival  int64
		lastPrompt   int64
		lastOutput   int64
		lastHashIDs  []int64
		firstHashIDs []int64
	}{
		{mooncakeConv, 300, 102_000_000_000, 979, 140, []int64{0, 7813}, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}},
		{mooncakeSynth, 300, 86_790_000_000, -1, -1, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			out := t.TempDir() + "/ds"
			res, err := Import("mooncake", realFile(t, tt.file), out, Options{})
			require.NoError(t, err)
			require.Equal(t, int64(tt.rows), res.Rows)
			require.Equal(t, tt.lastArrival, res.SpanNs)
			d, err := datasets.Open(out)
			require.NoError(t, err)
			require.Equal(t, "512", d.Manifest.Source.Detail["hash_block_size"])
			for _, n := range d.Manifest.Notes {
				require.NotContains(t, n, "hash_ids count other than", "every published request has ceil(input/512) hashes")
			}
			rows, err := datasets.ReadAll[datasets.Request](d, datasets.TableRequests)
			require.NoError(t, err)
			require.Len(t, rows, tt.rows)
			checkRequests(t, rows, true)
			last := rows[len(rows)-1]
			require.Equal(t, tt.lastArrival, last.ArrivalNs)
			if tt.lastPrompt >= 0 {
				require.Equal(t, tt.lastPrompt, last.PromptTokens)
				require.Equal(t, tt.lastOutput, last.OutputTokens)
				require.Equal(t, tt.lastHashIDs, last.PrefixHashIDs)
			}
			if tt.firstHashIDs != nil {
				require.Equal(t, datasets.Request{ReqID: "000000", ArrivalNs: 0, PromptTokens: 6758, OutputTokens: 500,
					PrefixHashIDs: tt.firstHashIDs, FirstScheduledNs: -1, FirstTokenNs: -1, FinishNs: -1, Status: "not_run"}, rows[0])
			}
		})
	}
}

func TestMooncakeParsing(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []datasets.Request
		notes   []string
		wantErr string
	}{
		{name: "float ms, blank lines, no trailing newline, hash mismatch noted",
			in: "{\"timestamp\": 1000, \"input_length\": 600, \"output_length\": 3, \"hash_ids\": [7, 8]}\n\n" +
				"{\"timestamp\": 1000.5, \"input_length\": 10, \"output_length\": 0, \"hash_ids\": [7, 9], \"extra\": true}",
			want: []datasets.Request{
				{ReqID: "000000", ArrivalNs: 0, PromptTokens: 600, OutputTokens: 3, PrefixHashIDs: []int64{7, 8}},
				{ReqID: "000001", ArrivalNs: 500_000, PromptTokens: 10, OutputTokens: 0, PrefixHashIDs: []int64{7, 9}},
			},
			notes: []string{"1 of 2 requests have a hash_ids count other than ceil(input_length/512)"}},
		{name: "missing hash_ids is an empty prefix", in: `{"timestamp": 0, "input_length": 0, "output_length": 1}`,
			want: []datasets.Request{{ReqID: "000000", OutputTokens: 1}}},
		{name: "string count", in: `{"timestamp": 0, "input_length": "abc", "output_length": 1}`,
			wantErr: `in:1: input_length: "abc" is not an integer`},
		{name: "negative", in: `{"timestamp": 0, "input_length": 5, "output_length": -1}`, wantErr: "in:1: output_length: -1 is negative"},
		{name: "missing field", in: `{"timestamp": 0, "output_length": 1}`, wantErr: "in:1: missing field input_length"},
		{name: "backwards", in: "{\"timestamp\": 5, \"input_length\": 1, \"output_length\": 1}\n{\"timestamp\": 4, \"input_length\": 1, \"output_length\": 1}",
			wantErr: "in:2: timestamp: 4 ms is earlier than the previous line's 5 ms; arrivals must be in time order"},
		{name: "bad json", in: "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n{\"timestamp\": 0,", wantErr: "in:2: truncated JSON object"},
		{name: "bad hash", in: `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": ["a"]}`, wantErr: "in:1: hash_ids: string where the format has an integer"},
		{name: "two objects on a line", in: `{"timestamp": 0, "input_length": 1, "output_length": 1} {}`, wantErr: "in:1: trailing data"},
		{name: "array", in: `[1,2]`, wantErr: "in:1: array is not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, s, err := parseRequests("mooncake", []byte(tt.in), nil)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			for i := range tt.want {
				tt.want[i].FirstScheduledNs, tt.want[i].FirstTokenNs, tt.want[i].FinishNs = -1, -1, -1
				tt.want[i].Status = datasets.StatusNotRun
			}
			require.Equal(t, tt.want, rows)
			for _, n := range tt.notes {
				require.Contains(t, s.m.Notes, n)
			}
		})
	}
}
