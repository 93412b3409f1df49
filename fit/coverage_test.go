package fit

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// Must-show (a): on synthetic data with known coefficients and 3%
// multiplicative Gaussian noise, NNLS and non-negative Huber recover the
// coefficients within their own 95% bootstrap intervals; and over 100
// seeded repetitions the intervals cover the truth at about their nominal
// rate. The pooled coverage (100 repetitions × 5 coefficients = 500
// intervals) must lie in [85%, 99%]: at a true rate of 95% the binomial
// standard error is 1%, so the band is wide enough not to flake and narrow
// enough to catch an interval that is badly too short or too long.

func TestRecoverWithinBootstrapIntervals(t *testing.T) {
	d := synthData(7, 600, synthTerms, synthTrue, 0.03)
	for _, method := range []string{MethodNNLS, MethodHuberNN} {
		res, err := Linear(d, Options{Terms: synthTerms, Method: method, Bootstrap: 300, Seed: 7})
		require.NoError(t, err)
		m := res.Model
		require.Equal(t, 0.95, m.CoefLevel)
		for j, truth := range synthTrue {
			require.InEpsilon(t, truth, m.Coef[j], 0.25, "%s %s", method, synthTerms[j])
			require.True(t, m.CoefLo[j] <= truth && truth <= m.CoefHi[j],
				"%s: %s true %g outside [%g, %g]", method, synthTerms[j], truth, m.CoefLo[j], m.CoefHi[j])
		}
	}
}

func TestBootstrapCoverage(t *testing.T) {
	if testing.Short() {
		t.Skip("100 bootstrap repetitions")
	}
	const reps, boots, n = 100, 200, 300
	for _, method := range []string{MethodNNLS, MethodHuberNN} {
		covered, total := 0, 0
		perTerm := make([]int, len(synthTrue))
		for r := 0; r < reps; r++ {
			d := synthData(uint64(1000+r), n, synthTerms, synthTrue, 0.03)
			res, err := Linear(d, Options{Terms: synthTerms, Method: method, Bootstrap: boots, Seed: uint64(r)})
			require.NoError(t, err)
			for j, truth := range synthTrue {
				total++
				if res.Model.CoefLo[j] <= truth && truth <= res.Model.CoefHi[j] {
					covered++
					perTerm[j]++
				}
			}
		}
		rate := float64(covered) / float64(total)
		t.Logf("%s: nominal 95%% intervals covered the truth %d/%d = %.1f%% (per term %v of %d)", method, covered, total, 100*rate, perTerm, reps)
		require.GreaterOrEqual(t, rate, 0.85, method)
		require.LessOrEqual(t, rate, 0.99, method)
		for j, c := range perTerm {
			require.GreaterOrEqual(t, c, 80, fmt.Sprintf("%s %s", method, synthTerms[j]))
		}
	}
}

func TestBootstrapPredictionInterval(t *testing.T) {
	d := synthData(8, 800, synthTerms, synthTrue, 0.03)
	res, err := Linear(d, Options{Terms: synthTerms, Bootstrap: 200, Seed: 1, Workers: 3})
	require.NoError(t, err)
	// Same seed, one worker: identical intervals.
	res1, err := Linear(d, Options{Terms: synthTerms, Bootstrap: 200, Seed: 1})
	require.NoError(t, err)
	require.Equal(t, res1.Model.CoefLo, res.Model.CoefLo)
	// Fresh steps from the same process fall inside 90% intervals about 90%
	// of the time, whether from the bootstrap or the residual quantiles.
	fresh := synthData(9, 2000, synthTerms, synthTrue, 0.03)
	inBoot, inResid := 0, 0
	for i, f := range fresh.Features {
		_, lo, hi := res.Boot.PredictInterval(f, 0.9)
		if lo <= fresh.Y[i] && fresh.Y[i] <= hi {
			inBoot++
		}
		_, lo, hi = res.Model.PredictIntervalNs(f, 0.9)
		if lo <= fresh.Y[i] && fresh.Y[i] <= hi {
			inResid++
		}
	}
	t.Logf("90%% prediction intervals: bootstrap %.1f%%, residual quantiles %.1f%%", 100*float64(inBoot)/2000, 100*float64(inResid)/2000)
	require.InDelta(t, 0.9, float64(inBoot)/2000, 0.04)
	require.InDelta(t, 0.9, float64(inResid)/2000, 0.04)
}
