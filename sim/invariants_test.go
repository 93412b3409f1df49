//go:build invariants

package sim

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/sim/sched"
)

// panicOf is what f panics with (nil: it returned).
func panicOf(f func()) (msg any) {
	defer func() { msg = recover() }()
	f()
	return nil
}

// Under the invariants tag a step that breaks the engine's rules, or a
// sink whose tables lost a row, panics naming what broke.
func TestEngineInvariantsTrip(t *testing.T) {
	// An engine under the default limits (package scenario plans them; an
	// internal test cannot import it), its steps priced at a constant.
	steps, err := fpm.NewLinear([]string{fpm.TermConst}, []float64{1e6})
	require.NoError(t, err)
	p := &Plan{Models: fpm.Models{FPM: steps, Host: fpm.DefaultHostModel(), Payload: fpm.DefaultPayloadModel()},
		Sched: sched.Config{MaxNumSeqs: 256, MaxNumBatchedTokens: 8192, BlockSize: 16, NumGPUBlocks: 4000, MaxModelLen: 32768,
			ChunkedPrefill: true, PrefixCaching: true}, Async: true}
	good := func() (*datasets.Step, []datasets.StepRequest) {
		return &datasets.Step{StepID: 7, TScheduleStart: 1, TScheduleEnd: 2, TDispatch: 3, TOutput: 4, TUpdateEnd: 5,
				NumNewReqs: 1, TotalScheduledTokens: 30, KVBlocksUsed: 2, KVBlocksTotal: 10},
			[]datasets.StepRequest{{StepID: 7, NumScheduledTokens: 30}}
	}
	for _, tc := range []struct {
		name   string
		breaks func(e *Engine, s *datasets.Step, rows []datasets.StepRequest)
		want   string
	}{
		{name: "consistent"},
		{name: "step id repeats", breaks: func(e *Engine, _ *datasets.Step, _ []datasets.StepRequest) { e.lastStepID = 7 },
			want: "engine: step 7 recorded after step 7"},
		{name: "timings out of order", breaks: func(_ *Engine, s *datasets.Step, _ []datasets.StepRequest) { s.TOutput = 6 },
			want: "engine: step 7: timings out of order: schedule 1-2, dispatch 3, output 6, update end 5"},
		{name: "token budget", breaks: func(e *Engine, s *datasets.Step, rows []datasets.StepRequest) {
			s.TotalScheduledTokens = int64(e.cfg.Sched.MaxNumBatchedTokens) + 1
			rows[0].NumScheduledTokens = s.TotalScheduledTokens
		}, want: "engine: step 7: 8193 tokens, 1 requests, 2 of 10 KV blocks: beyond max_num_batched_tokens 8192"},
		{name: "row of another step", breaks: func(_ *Engine, _ *datasets.Step, rows []datasets.StepRequest) { rows[0].StepID = 6 },
			want: "engine: step 7's step_requests row 0 names step 6"},
		{name: "rows short of the tokens", breaks: func(_ *Engine, _ *datasets.Step, rows []datasets.StepRequest) { rows[0].NumScheduledTokens = 29 },
			want: "engine: step 7: 1 step_requests rows with 29 tokens for 1 requests with 30 tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := p.NewEngine(Backend{}, NewRunMetrics())
			require.NoError(t, err)
			s, rows := good()
			if tc.breaks != nil {
				tc.breaks(e, s, rows)
			}
			msg := panicOf(func() { e.checkStep(s, rows) })
			if tc.want == "" {
				assert.Nil(t, msg)
				return
			}
			require.NotNil(t, msg, "the broken step passed")
			assert.Contains(t, msg, "invariant violated: "+tc.want)
		})
	}
	t.Run("live requests", func(t *testing.T) {
		e, err := p.NewEngine(Backend{}, NewRunMetrics())
		require.NoError(t, err)
		assert.Nil(t, panicOf(func() { e.checkLive(0) }))
		e.reqs["ghost"] = &reqState{}
		assert.Equal(t, "invariant violated: engine: after step 0: 1 live requests, the scheduler has 0 running + waiting", panicOf(func() { e.checkLive(0) }))
	})
	t.Run("sink rows", func(t *testing.T) {
		w, err := datasets.Create(filepath.Join(t.TempDir(), "ds"), datasets.Manifest{}, datasets.CreateOptions{})
		require.NoError(t, err)
		ds, err := NewDatasetSink(w, true)
		require.NoError(t, err)
		s, rows := good()
		require.NoError(t, ds.Step(s, rows))
		require.NoError(t, ds.Request(&datasets.Request{ReqID: "a"}))
		ds.reqRows++ // a request given to the table that it does not hold
		assert.Equal(t, "invariant violated: dataset sink: after step 8: steps, step_requests and requests hold [1 1 1] rows, [1 1 2] were written",
			panicOf(func() { ds.checkRows(8) }))
		require.NoError(t, w.Abort("test"))
	})
}
