package fit

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// Must-show (b): with 2% stragglers (+30–80 ms on a step, as a GC pause or a
// host hiccup adds), Huber recovers the coefficients and predicts clean
// steps better than OLS, whose fixed cost is dragged up by the outliers.
func TestHuberBeatsOLSWithStragglers(t *testing.T) {
	d := synthData(11, 2000, synthTerms, synthTrue, 0.02)
	rng := rand.New(rand.NewPCG(11, 11))
	stragglers := 0
	for i := range d.Y {
		if rng.Float64() < 0.02 {
			d.Y[i] += 30e6 + 50e6*rng.Float64()
			stragglers++
		}
	}
	require.Greater(t, stragglers, 20)
	clean := synthData(12, 2000, synthTerms, synthTrue, 0)

	fitWith := func(method string) (*Result, Report) {
		res, err := Linear(d, Options{Terms: synthTerms, Method: method})
		require.NoError(t, err)
		return res, Evaluate(res.Model, clean, 0)
	}
	ols, olsRep := fitWith(MethodOLS)
	hub, hubRep := fitWith(MethodHuber)
	hnn, hnnRep := fitWith(MethodHuberNN)
	constErr := func(r *Result) float64 { return math.Abs(r.Model.Coef[0]-synthTrue[0]) / synthTrue[0] }
	t.Logf("const: true %.3g, OLS %.3g, Huber %.3g, Huber-NN %.3g", synthTrue[0], ols.Model.Coef[0], hub.Model.Coef[0], hnn.Model.Coef[0])
	t.Logf("clean-step MAPE: OLS %.2f%%, Huber %.2f%%, Huber-NN %.2f%%", olsRep.Overall.MAPE, hubRep.Overall.MAPE, hnnRep.Overall.MAPE)
	require.Less(t, constErr(hub), 0.05)
	require.Greater(t, constErr(ols), 3*constErr(hub))
	require.Less(t, hubRep.Overall.MAPE, olsRep.Overall.MAPE/2)
	require.Less(t, hnnRep.Overall.MAPE, olsRep.Overall.MAPE/2)
	require.Greater(t, hub.Iterations, 1)
	require.Greater(t, hub.HuberScale, 0.0)
}

func TestHuberWeightsFlagStragglers(t *testing.T) {
	d := synthData(13, 500, synthTerms, synthTrue, 0.01)
	d.Y[17] += 60e6
	ds, err := d.Design(synthTerms, false)
	require.NoError(t, err)
	h, err := Huber(ds, HuberOptions{})
	require.NoError(t, err)
	require.Less(t, h.Weights[17], 0.1)
	_, err = Huber(ds, HuberOptions{MaxIter: 1, Tol: 1e-300})
	require.ErrorIs(t, err, ErrNoConvergence)
}

func TestRelativeWeighting(t *testing.T) {
	d := synthData(14, 1000, synthTerms, synthTrue, 0.03)
	abs, err := Linear(d, Options{Terms: synthTerms})
	require.NoError(t, err)
	rel, err := Linear(d, Options{Terms: synthTerms, Relative: true})
	require.NoError(t, err)
	// Relative weighting minimises relative error, so its MAPE is no worse.
	require.LessOrEqual(t, Evaluate(rel.Model, d, 0).Overall.MAPE, Evaluate(abs.Model, d, 0).Overall.MAPE*1.01)
	hr, err := Linear(d, Options{Terms: synthTerms, Relative: true, Method: MethodHuber})
	require.NoError(t, err)
	require.InEpsilon(t, synthTrue[0], hr.Model.Coef[0], 0.1)
}
