package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

// The overload notes come from the requests and steps a run recorded: a
// run that keeps up has none; each sign of overload has its note.
func TestOverloadNotes(t *testing.T) {
	const s = int64(1e9)
	// steady: 40 requests, one a second, each 50 ms to its first token.
	steady := func(i int) (arrival, ttft int64) { return int64(i) * s, 50e6 }
	tests := []struct {
		name        string
		req         func(i int) (arrival, ttft int64)
		preemptions int32
		want        []string
	}{
		{"keeps up", steady, 0, nil},
		{"one preemption", steady, 1, []string{"1 preemption: the KV cache could not hold the running requests"}},
		{"a queue that grows", func(i int) (int64, int64) { return int64(i) * s, int64(i) * s / 4 }, 0,
			[]string{"the queue grows: requests arriving in the last quarter of the workload waited 8.8 s for their first token (median), those of the first quarter 1.250 s"}},
		{"TTFT beyond the run", func(i int) (int64, int64) {
			if i == 39 {
				return 39 * s, 50 * s
			}
			return steady(i)
		}, 0, []string{"TTFT beyond the run: a request waited 50.", "longer than the 39.0 s over which the workload arrived"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewRunMetrics()
			require.NoError(t, m.Step(&datasets.Step{Kind: "decode", NumPreempted: tc.preemptions}, nil))
			for i := range 40 {
				arrival, ttft := tc.req(i)
				require.NoError(t, m.Request(&datasets.Request{Status: datasets.StatusFinished, ArrivalNs: arrival,
					FirstTokenNs: arrival + ttft, FinishNs: arrival + ttft + 1e6, OutputTokens: 2}))
			}
			got := m.Report().Overload
			if tc.want == nil {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1, "%q", got)
			for _, w := range tc.want {
				assert.Contains(t, got[0], w)
			}
		})
	}
}
