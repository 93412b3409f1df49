package cluster_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/validate"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
)

// A cluster run stopped midway (a signal in the CLI) ends with
// sim.ErrInterrupted and leaves a valid partial dataset: every table
// closed, no temporary file, every request it started recorded.
func TestRunInterruptedLeavesPartialDataset(t *testing.T) {
	for _, pools := range []string{"{a: {replicas: 4}}", "{p: {role: prefill, replicas: 1}, d: {role: decode, replicas: 2}}"} {
		sc := scenario.Default()
		sc.Workload.Limit = 3000
		require.NoError(t, sc.Set("cluster.pools="+pools))
		require.NoError(t, sc.Set("cluster.router.name=kv"))
		p, err := sc.Plan()
		require.NoError(t, err)
		dir := filepath.Join(t.TempDir(), "ds")
		stop := make(chan struct{})
		_, err = scenario.Run(p, dir, sim.RunOptions{Stop: stop, Progress: func(int64) {
			select {
			case <-stop:
			default:
				close(stop)
			}
		}})
		require.ErrorIs(t, err, sim.ErrInterrupted, pools)

		rep, err := validate.Dataset(dir, validate.Options{})
		require.NoError(t, err)
		assert.True(t, rep.Partial, pools)
		assert.Zero(t, rep.Errors, "%s: %v", pools, rep.Violations)
		d, err := datasets.Open(dir)
		require.NoError(t, err)
		reqs, err := datasets.ReadAll[datasets.Request](d, datasets.TableRequests)
		require.NoError(t, err)
		assert.Greater(t, len(reqs), 512, "%s: the requests finished before the stop are kept", pools)
		assert.Less(t, len(reqs), 3000, "%s: the run stopped early", pools)
		require.NoError(t, filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
			assert.False(t, strings.Contains(filepath.Base(path), ".tmp"), "temporary file left: %s", path)
			return err
		}))
	}
}

// A cluster's latencies at the two edges of its FPM's prediction interval
// bracket the point simulation, with expert-parallel instances too; an
// FPM without intervals is refused with the pool it prices.
func TestBounds(t *testing.T) {
	lin, err := fpm.NewLinear([]string{fpm.TermConst, fpm.TermPrefillTokens, fpm.TermDecodeRequests, fpm.TermDecodeKVTokens},
		[]float64{5e6, 2e4, 3e4, 40})
	require.NoError(t, err)
	lin.Residuals = &fpm.ResidualQuantiles{Scale: fpm.ScaleRelative, P: []float64{0.05, 0.5, 0.95}, Values: []float64{-0.1, 0, 0.2}}
	for _, sets := range [][]string{
		{"cluster.pools={a: {replicas: 3}}"},
		{"model=" + tinyMoE, "cluster.pools={e: {replicas: 4, expert_parallel: 2}}"},
	} {
		sc := scenario.Default()
		sc.Workload = scenario.WorkloadSpec{Kind: "poisson", RateRPS: 30, Requests: 300,
			Prompt: scenario.LengthSpec{Kind: "fixed", Value: 800}, Output: scenario.LengthSpec{Kind: "fixed", Value: 60}}
		sc.Engine.NumGPUBlocks = 20000 // the tiny model's GPU would hold millions
		for _, s := range sets {
			require.NoError(t, sc.Set(s))
		}
		p, err := sc.Plan()
		require.NoError(t, err)
		_, err = scenario.Bounds(p, 0.9)
		require.ErrorContains(t, err, "fpm roofline has no prediction intervals", sets)
		p.Plan = p.WithModels(lin, p.Pools[0].Engine.Host)
		assert.Equal(t, 0.9, p.IntervalLevel(0))
		point, err := scenario.Simulate(p)
		require.NoError(t, err)
		iv, err := scenario.Bounds(p, 0.9)
		require.NoError(t, err)
		assert.Equal(t, sim.BoundsMethod, iv.Method)
		assert.Less(t, iv.E2E.Lo.P50, point.E2E.P50, sets)
		assert.Greater(t, iv.E2E.Hi.P50, point.E2E.P50, sets)
		assert.Less(t, iv.ITL.Lo.Mean, iv.ITL.Hi.Mean, sets)
	}
}
