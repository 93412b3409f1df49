package fit

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSolversRecoverExactCoefficients(t *testing.T) {
	d := synthData(1, 500, synthTerms, synthTrue, 0)
	ds, err := d.Design(synthTerms, false)
	require.NoError(t, err)
	ols, err := OLS(ds)
	require.NoError(t, err)
	nn, err := NNLS(ds)
	require.NoError(t, err)
	h, err := Huber(ds, HuberOptions{NonNegative: true})
	require.NoError(t, err)
	for j := range synthTrue {
		require.InEpsilon(t, synthTrue[j], ols[j], 1e-6, synthTerms[j])
		require.InEpsilon(t, synthTrue[j], nn[j], 1e-6, synthTerms[j])
		require.InEpsilon(t, synthTrue[j], h.Coef[j], 1e-6, synthTerms[j])
	}
}

func TestNNLSActiveConstraint(t *testing.T) {
	// y = 3·x0 − 2·x1 + noise: NNLS must set β1 = 0 and refit β0 alone.
	rng := rand.New(rand.NewPCG(2, 2))
	n := 200
	ds := &Design{Terms: []string{"a", "b"}, X: make([]float64, 2*n), Y: make([]float64, n)}
	var sxx, sxy float64
	for i := 0; i < n; i++ {
		x0, x1 := 1+rng.Float64(), rng.Float64()
		ds.X[2*i], ds.X[2*i+1] = x0, x1
		ds.Y[i] = 3*x0 - 2*x1 + 10
		sxx += x0 * x0
		sxy += x0 * ds.Y[i]
	}
	x, err := NNLS(ds)
	require.NoError(t, err)
	require.Equal(t, 0.0, x[1])
	require.InEpsilon(t, sxy/sxx, x[0], 1e-9)
	// KKT: gradient of the inactive coefficient points outward.
	g := NewGram(ds.X, ds.Y, nil, 2)
	grad1 := g.XtY[1] - g.XtX[2]*x[0] - g.XtX[3]*x[1]
	require.LessOrEqual(t, grad1, 1e-9*math.Abs(g.XtY[1]))
}

func TestNNLSMatchesBruteForce(t *testing.T) {
	// On random problems with some negative true coefficients, NNLS equals
	// the best non-negative least-squares fit over all 2^p passive sets.
	for seed := uint64(0); seed < 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		p, n := 4, 40
		ds := &Design{Terms: []string{"a", "b", "c", "d"}, X: make([]float64, p*n), Y: make([]float64, n)}
		for i := range ds.X {
			ds.X[i] = rng.Float64()
		}
		for i := 0; i < n; i++ {
			ds.Y[i] = 1 + 2*ds.X[i*p] - 1.5*ds.X[i*p+1] + 0.5*ds.X[i*p+2] - 0.2*ds.X[i*p+3] + 0.3*rng.NormFloat64()
		}
		g := NewGram(ds.X, ds.Y, nil, p)
		x, _, err := g.SolveNNLS()
		require.NoError(t, err)
		obj := func(c []float64) float64 {
			var s float64
			for i := 0; i < n; i++ {
				r := ds.Y[i] - dot(ds.Row(i), c)
				s += r * r
			}
			return s
		}
		best := math.Inf(1)
		G, b, _ := g.XtX, g.XtY, 0
		for mask := 0; mask < 1<<p; mask++ {
			var idx []int
			for j := 0; j < p; j++ {
				if mask&(1<<j) != 0 {
					idx = append(idx, j)
				}
			}
			z, ok := cholSolve(G, b, p, idx)
			if !ok {
				continue
			}
			feasible := true
			for _, v := range z {
				if v < 0 {
					feasible = false
				}
			}
			if feasible {
				best = math.Min(best, obj(z))
			}
		}
		for _, v := range x {
			require.GreaterOrEqual(t, v, 0.0)
		}
		require.InEpsilon(t, best, obj(x), 1e-9, "seed %d", seed)
	}
}

func TestMedianQuickselect(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for n := 1; n < 60; n++ {
		a := make([]float64, n)
		for i := range a {
			a[i] = math.Round(rng.NormFloat64() * 3) // ties
		}
		s := append([]float64(nil), a...)
		sortFloats(s)
		want := s[n/2]
		if n%2 == 0 {
			want = (s[n/2-1] + s[n/2]) / 2
		}
		require.Equal(t, want, median(a), "n=%d", n)
	}
}

func sortFloats(a []float64) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

func TestDesignHelpersAndIntervals(t *testing.T) {
	d := synthData(5, 200, synthTerms, synthTrue, 0)
	ds, err := d.Design(synthTerms, false)
	require.NoError(t, err)
	r, c := ds.Matrix().Dims()
	require.Equal(t, [2]int{200, 5}, [2]int{r, c})
	pred := ds.Predict(synthTrue)
	for i := range pred {
		require.InEpsilon(t, ds.Y[i], pred[i], 1e-12)
	}
	// A noiseless Huber fit has zero scale and unit weights.
	h, err := Huber(ds, HuberOptions{})
	require.NoError(t, err)
	require.Equal(t, 0.0, h.Scale)
	require.Equal(t, 1.0, h.Weights[0])

	noisy := synthData(6, 300, synthTerms, synthTrue, 0.03)
	res, err := Linear(noisy, Options{Terms: synthTerms, Method: MethodOLS, Bootstrap: 100, Level: 0.9, Seed: 2})
	require.NoError(t, err)
	lo95, hi95 := res.Boot.CoefInterval(0, 0.95)
	require.LessOrEqual(t, lo95, res.Model.CoefLo[0])
	require.GreaterOrEqual(t, hi95, res.Model.CoefHi[0])
	require.Equal(t, 0, res.Boot.Failed)
}
