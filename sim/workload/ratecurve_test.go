package workload

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A constant process on a rate curve sends, by each time, the curve's
// integral up to it (within one request), and a Poisson one the same on
// average.
func TestRateCurveArrivals(t *testing.T) {
	curve := []RatePoint{{0, 2}, {100, 20}, {200, 0}, {250, 0}, {300, 10}}
	want := func(s float64) float64 { // the integral, by hand
		switch {
		case s <= 100:
			return 2*s + 0.09*s*s
		case s <= 200:
			d := s - 100
			return 1100 + 20*d - 0.1*d*d
		case s <= 250:
			return 2100
		case s <= 300:
			d := s - 250
			return 2100 + 0.1*d*d
		}
		return 2350 + 10*(s-300)
	}
	for _, tc := range []struct {
		process string
		tol     float64
	}{{ProcessConstant, 1.01}, {ProcessPoisson, 60}} {
		t.Run(tc.process, func(t *testing.T) {
			g, err := NewOpenLoop(OpenLoopConfig{Process: tc.process, RateCurve: curve, DurationNs: 400e9, Seed: 7,
				Lengths: Lengths{Prompt: Fixed(10), Output: Fixed(5)}})
			require.NoError(t, err)
			var at []float64
			for a, ok := g.Next(); ok; a, ok = g.Next() {
				at = append(at, float64(a.AtNs)/1e9)
			}
			for _, s := range []float64{50, 100, 150, 200, 225, 250, 275, 300, 399} {
				n := 0
				for _, x := range at {
					if x < s {
						n++
					}
				}
				assert.InDelta(t, want(s), float64(n), tc.tol, "arrivals before %g s", s)
			}
			for _, x := range at {
				assert.False(t, x > 200 && x < 250, "an arrival at %g s, where the rate is 0", x)
			}
		})
	}
}

func TestRateCurveValidation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		curve []RatePoint
		rate  float64
		want  string
	}{
		{"late start", []RatePoint{{5, 1}}, 0, "RateCurve[0].t_s is 5: the curve starts at t_s 0"},
		{"back in time", []RatePoint{{0, 1}, {10, 1}, {10, 2}}, 0, "RateCurve[2].t_s is 10: times must increase"},
		{"negative rate", []RatePoint{{0, 1}, {10, -1}}, 0, "RateCurve[1].rps is -1"},
		{"infinite rate", []RatePoint{{0, math.Inf(1)}}, 0, "RateCurve[0].rps is +Inf"},
		{"all zero", []RatePoint{{0, 0}, {10, 0}}, 0, "every rate is 0"},
		{"with a rate", []RatePoint{{0, 1}}, 3, "RateRPS=3 with a RateCurve: set one of them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewOpenLoop(OpenLoopConfig{Process: ProcessPoisson, RateRPS: tc.rate, RateCurve: tc.curve, Requests: 10,
				Lengths: Lengths{Prompt: Fixed(10), Output: Fixed(5)}})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// A curve that ends at rate 0 ends the stream once its integral is spent.
func TestRateCurveEnds(t *testing.T) {
	g, err := NewOpenLoop(OpenLoopConfig{Process: ProcessConstant, RateCurve: []RatePoint{{0, 10}, {10, 0}}, Requests: 1000,
		Lengths: Lengths{Prompt: Fixed(10), Output: Fixed(5)}})
	require.NoError(t, err)
	n := 0
	for _, ok := g.Next(); ok; _, ok = g.Next() {
		n++
	}
	assert.Equal(t, 50, n, "the integral is 50 requests: the 0th to the 49th")
}
