package sim_test

import (
	"path/filepath"
	"testing"

	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
	"github.com/stretchr/testify/require"
)

// Re-simulating at the two edges of a model's interval brackets the point
// run's latencies, deterministically; a model without intervals is
// refused.
func TestBoundsBracketThePointRun(t *testing.T) {
	sc := poissonScenario(7)
	sc.Engine.NumGPUBlocks = 0 // no preemption: latencies move with step times
	p, err := sc.Plan()
	require.NoError(t, err)
	_, err = scenario.Bounds(p, 0.9)
	require.ErrorContains(t, err, "no prediction intervals", "the roofline prior has none")

	lin, err := fpm.NewLinear([]string{fpm.TermConst, fpm.TermPrefillTokens, fpm.TermDecodeRequests, fpm.TermDecodeKVTokens},
		[]float64{5e6, 2e4, 3e4, 40})
	require.NoError(t, err)
	lin.Residuals = &fpm.ResidualQuantiles{Scale: fpm.ScaleRelative, P: []float64{0.05, 0.5, 0.95}, Values: []float64{-0.1, 0, 0.15}}
	p.Engine().FPM, p.Engine().FPMName = lin, "linear"
	res, err := scenario.Run(p, filepath.Join(t.TempDir(), "ds"), sim.RunOptions{})
	require.NoError(t, err)
	iv, err := scenario.Bounds(p, 0.9)
	require.NoError(t, err)
	require.Equal(t, sim.BoundsMethod, iv.Method)
	for _, c := range []struct {
		name  string
		point sim.Summary
		b     sim.Bounded
	}{{"ttft", res.TTFT, iv.TTFT}, {"itl", res.ITL, iv.ITL}, {"e2e", res.E2E, iv.E2E}} {
		t.Logf("%s p50 %.2f ms in [%.2f, %.2f], p99 %.2f in [%.2f, %.2f]", c.name, c.point.P50, c.b.Lo.P50, c.b.Hi.P50, c.point.P99, c.b.Lo.P99, c.b.Hi.P99)
		require.Less(t, c.b.Lo.P50, c.point.P50, c.name)
		require.Greater(t, c.b.Hi.P50, c.point.P50, c.name)
		require.LessOrEqual(t, c.b.Lo.Mean, c.b.Hi.Mean, c.name)
		require.Equal(t, c.point.Count, c.b.Lo.Count, "%s: every request finishes in both runs", c.name)
	}
	again, err := scenario.Bounds(p, 0.9)
	require.NoError(t, err)
	require.Equal(t, iv, again, "deterministic")
	narrow, err := scenario.Bounds(p, 0.5)
	require.NoError(t, err)
	require.Less(t, narrow.E2E.Hi.P50, iv.E2E.Hi.P50, "a narrower level, a narrower latency interval")
}
