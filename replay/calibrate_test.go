package replay

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
)

// Runs simulated with a known, perturbed host overhead under synchronous
// scheduling; calibration from the default host model, with the device
// model fixed to the one that generated the run, recovers the perturbation
// within 10%. (Fitted together, the two fixed costs trade off: in a
// synchronous loop both are paid once per step, and only their sum is
// well identified by request metrics.)
func TestCalibrateRecoversHostOverhead(t *testing.T) {
	cases := []struct {
		param string
		mult  float64
	}{
		{HostPrep, 2.5},
		{HostSchedUpdate, 0.5},
		{HostSchedUpdate, 3},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s×%g", c.param, c.mult), func(t *testing.T) {
			truth := fpm.DefaultHostModel()
			if c.param == HostPrep {
				truth.PrepFixedNs *= c.mult
			} else {
				truth.ScheduleFixedNs *= c.mult
				truth.UpdateFixedNs *= c.mult
			}
			dir, p := simulateHost(t, fmt.Sprintf("host-%s-%g", c.param, c.mult), truth)
			d, err := datasets.Open(dir)
			require.NoError(t, err)
			tr, err := LoadTrace(d)
			require.NoError(t, err)
			res, err := Calibrate([]CalibSet{{Name: "sim", Trace: tr, Plan: p.Plan}}, CalibOptions{Fixed: p.Engine().FPM, Host: fpm.DefaultHostModel(),
				HostParams: []string{c.param}, MaxEvals: 100, Prior: 1e-9})
			require.NoError(t, err)
			require.Len(t, res.Params, 1)
			assert.InEpsilon(t, c.mult, res.Params[0].Multiplier, 0.10)
			assert.Less(t, res.Train[0].MeanAbs(), res.Before[0].MeanAbs())
			assert.LessOrEqual(t, res.Evals, 100)
		})
	}
}

func simulateHost(t *testing.T, name string, host fpm.HostModel) (string, *scenario.Plan) {
	t.Helper()
	if v, ok := simCache.Load(name); ok {
		o := v.(*simOut)
		return o.dir, o.plan
	}
	sc := scenario.Default()
	sc.Seed = 7
	sc.Engine.AsyncScheduling = false
	sc.Workload = scenario.WorkloadSpec{Kind: "poisson", RateRPS: 4, Requests: 150,
		Prompt: scenario.LengthSpec{Kind: "lognormal", Mean: 900, Sigma: 0.8, Max: 6000},
		Output: scenario.LengthSpec{Kind: "lognormal", Mean: 120, Sigma: 0.7, Max: 1000}}
	p, err := sc.Plan()
	require.NoError(t, err)
	p.Engine().Host = host
	dir := sharedTmp(t) + "/" + name
	_, err = scenario.Run(p, dir, sim.RunOptions{Overwrite: true})
	require.NoError(t, err)
	simCache.Store(name, &simOut{dir: dir, plan: p})
	return dir, p
}

// A time-ordered hold-out is scored after the fit, and the start model,
// the run's own roofline prior 40% off on its terms, scaled, brings the
// metrics of the run closer; the artifact is a roofline that Load reads
// back into the calibrated model, intervals and all.
func TestCalibratePriorWithHoldout(t *testing.T) {
	dir, p := simulated(t, "async")
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	tr, err := LoadTrace(d)
	require.NoError(t, err)
	prior, ok := p.Engine().FPM.(fpm.Scalable)
	require.True(t, ok, "the roofline prior is scalable")
	start, err := prior.Scaled([]float64{1.4, 1.4, 1.4, 1.4})
	require.NoError(t, err)
	res, err := Calibrate([]CalibSet{{Name: "sim", Trace: tr, Plan: p.Plan}}, CalibOptions{Start: start, Host: p.Engine().Host,
		Terms: []string{fpm.PriorTermGEMM, fpm.PriorTermDecodeAttn, fpm.PriorTermPrefillAttn}, HostParams: []string{}, Holdout: 0.3, MaxEvals: 120})
	require.NoError(t, err)
	require.Len(t, res.Holdout, 1)
	assert.Equal(t, "holdout-requests", res.Holdout[0].Split)
	assert.Less(t, res.Train[0].MeanAbs(), 0.5*res.Before[0].MeanAbs())
	assert.Less(t, math.Abs(res.Holdout[0].RelErr["itl_mean"]), 0.1)
	require.Len(t, res.Params, 3)
	assert.Equal(t, "fpm.gemm", res.Params[0].Name)
	assert.InDelta(t, 1.4, res.Params[0].Start, 1e-12, "a prior's term starts at its multiplier")
	a, err := res.Artifact(nil, nil, "test")
	require.NoError(t, err)
	assert.Equal(t, fpm.FormRoofline, a.Form)
	assert.NotEmpty(t, a.Params)
	// The calibration carries its own fit's uncertainty: the fitted
	// requests' ITL residuals, recorded with how they were made.
	require.NotNil(t, a.Residuals)
	assert.Equal(t, CalibResidualSource, a.Residuals.Source)
	assert.Equal(t, res.Train[0].Requests, a.Residuals.N)
	assert.Contains(t, res.Uncertainty, "fitted requests")
	assert.Empty(t, fpm.NoUncertainty(res.Model, "cal.json"), "a calibrated model has intervals")
	back, err := a.Model()
	require.NoError(t, err)
	f := fpm.Features{DecodeRequests: 32, DecodeKVTokens: 32 * 900, PrefillTokens: 512, PrefillRequests: 1, PrefillAttn: 512 * 256}
	assert.Equal(t, res.Model.PredictNs(f), back.PredictNs(f), "the artifact reads back into the calibrated model")
	_, lo, hi := back.(fpm.IntervalFPM).PredictIntervalNs(f, 0.9)
	assert.Less(t, lo, hi)
}

func TestNelderMeadQuadratic(t *testing.T) {
	n := 0
	f := func(x []float64) float64 { n++; return (x[0]-1)*(x[0]-1) + 3*(x[1]+2)*(x[1]+2) }
	r := nelderMead(f, []float64{0, 0}, 0.5, 500, 1e-6, &n)
	assert.LessOrEqual(t, n, 500)
	assert.True(t, r.converged)
	assert.Less(t, r.width, 1e-6)
	assert.InDelta(t, 1, r.x[0], 1e-4)
	assert.InDelta(t, -2, r.x[1], 1e-4)
	assert.Less(t, r.f, 1e-8)
	st, why := r.status(500)
	assert.Equal(t, StatusConverged, st)
	assert.Contains(t, why, "the simplex spans")
	n = 0
	r = nelderMead(f, []float64{0, 0}, 0.5, 12, 1e-6, &n)
	assert.False(t, r.converged, "12 evaluations do not pin the minimum")
	st, why = r.status(12)
	assert.Equal(t, StatusEvalLimit, st)
	assert.Contains(t, why, "evaluation limit (12 replays)")
	n = 0
	r = nelderMead(func([]float64) float64 { n++; return 1 }, []float64{0, 0}, 0.5, 500, 1e-6, &n)
	st, why = r.status(500)
	assert.Equal(t, StatusConverged, st, "a plateau")
	assert.Contains(t, why, "the same at every vertex")
	assert.Equal(t, 3, n)
}
