package fit

import (
	"github.com/steplab/steplab/fpm"
	"math"
	"math/rand/v2"
)

// Synthetic step mixes for tests and benchmarks: features drawn like a
// serving trace (decode batches 1..256 at contexts 100..8000, prefill
// chunks 64..8192 tokens, some mixed steps), times from known coefficients.

var synthTerms = []string{fpm.TermConst, fpm.TermPrefillTokens, fpm.TermPrefillAttn, fpm.TermDecodeRequests, fpm.TermDecodeKVTokens}

// synthTrue are the true coefficients of synthTerms (ns, ns/token, ...).
var synthTrue = []float64{4e6, 60, 0.02, 2e4, 1.5}

func synthFeatures(rng *rand.Rand) fpm.Features {
	var f fpm.Features
	kind := rng.IntN(10)
	if kind < 6 || kind >= 8 { // decode or mixed
		b := float64(1 + rng.IntN(256))
		f.DecodeRequests = b
		f.DecodeKVTokens = b * (100 + 7900*rng.Float64())
		f.PaddedBatch = b
	}
	if kind >= 6 { // prefill or mixed
		c := math.Round(64 + 8128*rng.Float64())
		k := math.Round(4000 * rng.Float64() * float64(rng.IntN(2)))
		f.PrefillTokens, f.PrefillKVTokens, f.PrefillRequests = c, k, 1
		f.PrefillAttn = c * (k + c/2)
	}
	return f
}

// synthData draws n steps with multiplicative Gaussian noise of relative
// size sigma around the true model of terms/coef.
func synthData(seed uint64, n int, terms []string, coef []float64, sigma float64) *Data {
	rng := rand.New(rand.NewPCG(seed, 1))
	m, err := fpm.NewLinear(terms, coef)
	if err != nil {
		panic(err)
	}
	d := &Data{Features: make([]fpm.Features, n), Y: make([]float64, n), StepIDs: make([]int64, n)}
	for i := range d.Y {
		d.Features[i] = synthFeatures(rng)
		d.Y[i] = m.PredictNs(d.Features[i]) * (1 + sigma*rng.NormFloat64())
		d.StepIDs[i] = int64(1000 + i)
	}
	return d
}
