package replay

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/scenario"
)

// intervalModel is the generating model of the "linear-gen" run with
// relative residual quantiles of ±spread at 5 and 95%, its const scaled.
func intervalModel(t *testing.T, scaleConst, spread float64) *fpm.Linear {
	t.Helper()
	terms := []string{fpm.TermConst, fpm.TermPrefillTokens, fpm.TermPrefillAttn, fpm.TermDecodeRequests,
		fpm.TermDecodeKVTokens, fpm.TermNewReqTokens}
	m, err := fpm.NewLinear(terms, []float64{4.5e6 * scaleConst, 9e3, 0.02, 2.5e4, 30, 8})
	require.NoError(t, err)
	m.Residuals = &fpm.ResidualQuantiles{Scale: fpm.ScaleRelative, P: []float64{0.05, 0.5, 0.95}, Values: []float64{-spread, 0, spread}}
	return m
}

func TestReplayStepsIntervals(t *testing.T) {
	dir := simulateWith(t, "linear-gen", intervalModel(t, 1, 0))
	host := fpm.DefaultHostModel()
	cases := []struct {
		name       string
		fpModel    fpm.FPM
		level      float64
		minC, maxC float64 // device-time coverage, percent
	}{
		{"generating model", intervalModel(t, 1, 0.05), 0, 100, 100},
		{"const 30% high, 2% spread", intervalModel(t, 1.3, 0.02), 0.9, 0, 5},
		{"const 30% high, 30% spread", intervalModel(t, 1.3, 0.3), 0.9, 100, 100},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sum, rows := replayAll(t, dir, StepOptions{FPM: c.fpModel, Host: host, Level: c.level})
			require.NotNil(t, sum.Intervals)
			assert.Equal(t, 0.9, sum.Intervals.Level)
			require.Len(t, sum.Intervals.Fields, 2)
			gpu := sum.Intervals.Fields[0]
			assert.Equal(t, FieldGPU, gpu.Field)
			assert.Equal(t, int(sum.Steps), gpu.Overall.N)
			assert.GreaterOrEqual(t, gpu.Overall.Pct, c.minC)
			assert.LessOrEqual(t, gpu.Overall.Pct, c.maxC)
			kinds := 0
			for _, k := range gpu.ByKind {
				kinds += k.N
			}
			assert.Equal(t, gpu.Overall.N, kinds)
			for _, r := range rows {
				require.LessOrEqual(t, r.PredGPULo, r.PredGPU)
				require.GreaterOrEqual(t, r.PredGPUHi, r.PredGPU)
				require.Equal(t, r.PredGPU-r.PredGPULo, r.PredWall-r.PredWallLo, "the wall time carries the device interval")
				require.Equal(t, r.PredGPUHi-r.PredGPU, r.PredWallHi-r.PredWall)
			}
		})
	}
	// No interval: a model without one, or a negative level.
	for _, o := range []StepOptions{{FPM: fpm.NewRoofline(mustH200(t)).Prepare(), Host: host}, {FPM: intervalModel(t, 1, 0.05), Host: host, Level: -1}} {
		sum, rows := replayAll(t, dir, o)
		assert.Nil(t, sum.Intervals)
		assert.Equal(t, int64(-1), rows[0].PredGPULo)
		assert.Equal(t, int64(-1), rows[0].PredWallHi)
	}
}

func mustH200(t *testing.T) (catalog.Hardware, catalog.Shape) {
	t.Helper()
	hw, err := catalog.LookupHardware("H200")
	require.NoError(t, err)
	sh, err := catalog.LookupModel("Llama-3.1-8B")
	require.NoError(t, err)
	return hw, sh
}

// Request replay re-simulates at the interval's two edges, on one engine
// or on a cluster: the latencies bracket the point re-simulation, the
// generating model's interval contains most recorded requests (on the
// engine that generated them), and the result is deterministic.
func TestReplayRequestsIntervals(t *testing.T) {
	dir := simulateWith(t, "linear-gen", intervalModel(t, 1, 0))
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	for _, c := range []struct {
		name      string
		placement *scenario.Spec
	}{{"one engine", nil}, {"two replicas", &scenario.Spec{Pools: scenario.Pools{{Name: "r", Replicas: 2}}}}} {
		t.Run(c.name, func(t *testing.T) {
			p, _, err := scenario.PlanFromManifest(d.Manifest, scenario.ManifestOptions{Spec: c.placement})
			require.NoError(t, err)
			p.Plan = p.WithModels(intervalModel(t, 1, 0.1), fpm.DefaultHostModel())
			run := func() *RequestSummary {
				out := filepath.Join(t.TempDir(), "out")
				sum, err := RunRequests(d, RequestOptions{Plan: p.Plan}, Output{Dir: out, DatasetDir: dir, ModelName: "linear"})
				require.NoError(t, err)
				o, err := datasets.Open(out)
				require.NoError(t, err)
				rows, err := datasets.ReadAll[RequestRow](o, TableRequestComparison)
				require.NoError(t, err)
				for _, r := range rows {
					require.LessOrEqual(t, r.PredE2ELo, r.PredE2E)
					require.GreaterOrEqual(t, r.PredE2EHi, r.PredE2E)
				}
				return sum
			}
			sum := run()
			iv := sum.Intervals
			require.NotNil(t, iv)
			assert.Equal(t, IntervalMethod, iv.Method)
			for _, m := range []struct {
				name string
				l    LatencyInterval
				p    Dist
			}{{"ttft", iv.TTFT, sum.TTFT.Predicted}, {"itl", iv.ITL, sum.ITL.Predicted}, {"e2e", iv.E2E, sum.E2E.Predicted}} {
				assert.Less(t, m.l.Lo.P50, m.p.P50, m.name)
				assert.Greater(t, m.l.Hi.P50, m.p.P50, m.name)
				assert.Less(t, m.l.Lo.P99, m.l.Hi.P99, m.name)
				assert.Equal(t, sum.Compared, m.l.N, m.name)
				if c.placement != nil {
					continue // not the engine that generated the record
				}
				// Even the generating model's latencies need not lie
				// between the two re-simulations request by request: an
				// arrival lands at another point of the step pipeline
				// when step times shift.
				t.Logf("%s: %.1f%% of the requests between their two re-simulations", m.name, m.l.CoveragePct)
				assert.GreaterOrEqual(t, m.l.CoveragePct, 75.0, m.name)
			}
			assert.Equal(t, sum, run(), "deterministic")
		})
	}
	// A model without intervals is re-simulated once.
	p, _, err := scenario.PlanFromManifest(d.Manifest, scenario.ManifestOptions{})
	require.NoError(t, err)
	sum, err := RunRequests(d, RequestOptions{Plan: p.Plan}, Output{Dir: filepath.Join(t.TempDir(), "out"), DatasetDir: dir, ModelName: "roofline"})
	require.NoError(t, err)
	assert.Nil(t, sum.Intervals)
	assert.Contains(t, sum.NoUncertainty, "no uncertainty recorded: the model roofline is a prior")

	// A linear model with neither residuals nor a covariance (what
	// calibrate writes) has intervals of zero width: none is reported, the
	// summary says why instead.
	flat := intervalModel(t, 1, 0)
	flat.Residuals = nil
	p.Plan = p.WithModels(flat, fpm.DefaultHostModel())
	sum, err = RunRequests(d, RequestOptions{Plan: p.Plan}, Output{Dir: filepath.Join(t.TempDir(), "out"), DatasetDir: dir, ModelName: "cal.json"})
	require.NoError(t, err)
	assert.Nil(t, sum.Intervals, "a zero-width interval is never reported")
	assert.Contains(t, sum.NoUncertainty, "the model cal.json is a model that records no residuals")
	sum, err = RunRequests(d, RequestOptions{Plan: p.Plan, Level: -1}, Output{Dir: filepath.Join(t.TempDir(), "out"), DatasetDir: dir, ModelName: "cal.json"})
	require.NoError(t, err)
	assert.Empty(t, sum.NoUncertainty, "no interval asked for: nothing to say")
}
