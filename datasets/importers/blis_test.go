package importers

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

// Traces written by BLIS itself (testdata/blis/ATTRIBUTION.md).
func TestBLISTraces(t *testing.T) {
	t.Run("poisson", func(t *testing.T) {
		res, d, rows := importRequests(t, "blis", "testdata/blis/qwen3-14b-run.csv")
		require.Equal(t, int64(40), res.Rows)
		// Row 0: arrival 49999 µs, first chunk 80312, last 7165615.
		require.Equal(t, datasets.Request{ReqID: "0", ArrivalNs: 0, PromptTokens: 609, OutputTokens: 496, FirstScheduledNs: -1,
			FirstTokenNs: (80312 - 49999) * 1000, FinishNs: (7165615 - 49999) * 1000, NumPreemptions: -1, Status: "finished"}, rows[0])
		m := d.Manifest
		require.Equal(t, uint64(7), m.Workload.Seed)
		require.Equal(t, "3", m.Source.Detail["trace_version"])
		require.Equal(t, "generated", m.Source.Detail["mode"])
		require.Contains(t, strings.Join(m.Notes, "\n"), "blis: columns with values not kept: client_id, deadline_us")
	})
	t.Run("prefix groups", func(t *testing.T) {
		rows, s, err := parseRequests("blis", readFile(t, "testdata/blis/prefix-affinity-run.csv"),
			map[string][]byte{"in.yaml": readFile(t, "testdata/blis/prefix-affinity-run.yaml")})
		require.NoError(t, err)
		checkRequests(t, rows, true)
		require.Len(t, rows, 30)
		// Row 2: in group long-system-prompt (prefix 256) with a 58-token suffix.
		r := rows[2]
		require.Equal(t, "2", r.ReqID)
		require.Equal(t, int64(256+58), r.PromptTokens)
		require.Len(t, r.PrefixHashIDs, 256/BLISHashBlockTokens)
		require.Equal(t, int64(0), r.PrefixHashIDs[0])
		require.Empty(t, rows[0].PrefixHashIDs, "row 0 has no group")
		require.Equal(t, "16", s.m.Workload.Params["hash_block_size"])
		require.Contains(t, strings.Join(s.m.Notes, "\n"), "slo_class, tenant_id")
	})
}

func TestBLISParsing(t *testing.T) {
	hdr := strings.Join(BLISColumns, ",") + "\n"
	row := func(id, group, plen, in, out, server, arrive, send, first, last, status string) string {
		return id + ",c,,,,0," + group + "," + plen + ",true," + in + "," + out + ",0,0,0,0,0,,0," + server + "," + arrive + "," + send + "," + first + "," + last + ",0," + status + ",,\n"
	}
	tests := []struct {
		name, in, header string
		want             []datasets.Request
		wantErr          string
	}{
		{name: "send time, server tokens, statuses, order",
			in: hdr + row("7", "", "0", "10", "5", "12", "2000", "2500", "3000", "4000", "ok") +
				row("3", "", "0", "10", "5", "0", "1000", "0", "0", "0", "timeout") + row("9", "", "0", "8", "2", "0", "3000", "3000", "3500", "0", "incomplete"),
			header: "trace_version: 2\ntime_unit: microseconds\nmode: real\nwarm_up_requests: 0\nserver:\n  model: m\n  max_num_seqs: 64\n  block_size: 32\n",
			want: []datasets.Request{
				{ReqID: "3", ArrivalNs: 0, PromptTokens: 10, OutputTokens: 5, FirstScheduledNs: -1, FirstTokenNs: -1, FinishNs: -1, NumPreemptions: -1, Status: "aborted"},
				{ReqID: "7", ArrivalNs: 1_500_000, PromptTokens: 12, OutputTokens: 5, FirstScheduledNs: -1, FirstTokenNs: 2_000_000, FinishNs: 3_000_000, NumPreemptions: -1, Status: "finished"},
				{ReqID: "9", ArrivalNs: 2_000_000, PromptTokens: 8, OutputTokens: 2, FirstScheduledNs: -1, FirstTokenNs: 2_500_000, FinishNs: -1, NumPreemptions: -1, Status: "unfinished"},
			}},
		{name: "bad header version", in: hdr + row("1", "", "0", "1", "1", "0", "0", "0", "0", "0", "ok"), header: "trace_version: 9\n",
			wantErr: "in.yaml: trace_version 9 is not supported"},
		{name: "bad time unit", in: hdr + row("1", "", "0", "1", "1", "0", "0", "0", "0", "0", "ok"), header: "trace_version: 2\ntime_unit: seconds\n",
			wantErr: `in.yaml: time_unit "seconds" is not supported`},
		{name: "missing column", in: "request_id,input_tokens\n1,2\n", wantErr: "in:1: header has no prefix_group column"},
		{name: "negative", in: hdr + row("1", "", "0", "-1", "1", "0", "0", "0", "0", "0", "ok"), wantErr: `in:2: input_tokens: "-1" is not a non-negative integer`},
		{name: "duplicate id", in: hdr + row("1", "", "0", "1", "1", "0", "0", "0", "0", "0", "ok") + row("1", "", "0", "1", "1", "0", "0", "0", "0", "0", "ok"),
			wantErr: "in:3: request_id 1 already used on line 2"},
		{name: "chunks out of order", in: hdr + row("1", "", "0", "1", "1", "0", "100", "100", "50", "60", "ok"), wantErr: "in:2: chunk times 50, 60 are not in order"},
		{name: "empty", in: hdr, wantErr: "in: no requests"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sib map[string][]byte
			if tt.header != "" {
				sib = map[string][]byte{"in.yaml": []byte(tt.header)}
			}
			s := requestCase(t, "blis", tt.in, sib, tt.want, tt.wantErr)
			if s == nil {
				return
			}
			require.Equal(t, &datasets.EngineConfig{MaxNumSeqs: 64, BlockSize: 32}, s.m.Engine)
			require.Equal(t, "m", s.m.Model.Name)
		})
	}
}
