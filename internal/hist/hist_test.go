package hist

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Integers below 128 are exact; above, a quantile is within 0.4% of the
// value and never above the largest.
func TestNanos(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []float64
		q      float64
		want   float64
		relErr float64
	}{
		{name: "exact small", values: []float64{3, 5, 7, 9}, q: 0.5, want: 5},
		{name: "exact 127", values: []float64{127}, q: 1, want: 127},
		{name: "clamped to max", values: []float64{1000}, q: 0.5, want: 1000},
		{name: "large", values: []float64{1e9, 2e9, 3e9, 4e9, 5e9}, q: 0.5, want: 3e9, relErr: 1.0 / 256},
		{name: "rank rule", values: []float64{10, 20, 30, 40}, q: 0.9, want: 30},
		{name: "negative ignored", values: []float64{-5, 8}, q: 0, want: 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Hist[Nanos]
			for _, v := range tc.values {
				h.Add(v)
			}
			got := h.Quantile(tc.q)
			if tc.relErr == 0 {
				assert.Equal(t, tc.want, got)
			} else {
				assert.InEpsilon(t, tc.want, got, tc.relErr)
			}
			assert.LessOrEqual(t, got, h.Max())
		})
	}
}

func TestRelativeErrorBound(t *testing.T) {
	for v := 128.0; v < 1e15; v *= 1.37 {
		var h Hist[Nanos]
		h.Add(v)
		h.Add(2 * v) // so that the max does not clamp the first
		assert.InEpsilon(t, math.Floor(v), h.Bucket(0), 1.0/256, "v=%v", v)
	}
	for x := 1e-9; x < 8000; x *= 1.37 {
		var h Hist[Ratio]
		h.Add(x)
		assert.InEpsilon(t, x, h.Bucket(0), 1.0/16, "x=%v", x)
	}
}

func TestRatio(t *testing.T) {
	var h Hist[Ratio]
	for i := 1; i <= 1000; i++ {
		h.Add(float64(i) / 1000)
	}
	assert.InEpsilon(t, 0.5, h.Quantile(0.5), 0.07)
	assert.InEpsilon(t, 0.9, h.Quantile(0.9), 0.07)
	assert.InEpsilon(t, 0.5005, h.Mean(), 1e-12)
	assert.Equal(t, uint64(1000), h.Count())

	var z Hist[Ratio]
	z.Add(0)
	assert.Zero(t, z.Quantile(0.99), "exact zeros are their own bucket")
	var big Hist[Ratio]
	big.Add(1e6)
	assert.Equal(t, math.Ldexp(1+7.5/8, 12), big.Bucket(0.5), "beyond 2^13: the last bucket")
	var empty Hist[Ratio]
	assert.Zero(t, empty.Quantile(0.5))
	assert.Zero(t, empty.Mean())
}

// Buckets yields the non-empty buckets in order: a cumulative distribution.
func TestBuckets(t *testing.T) {
	var h Hist[Ratio]
	for _, x := range []float64{0, 0, 0.5, 0.5, 0.25, 100} {
		h.Add(x)
	}
	var xs []float64
	var total uint64
	for x, k := range h.Buckets() {
		if len(xs) > 0 {
			require.Greater(t, x, xs[len(xs)-1])
		}
		xs = append(xs, x)
		total += k
	}
	assert.Equal(t, h.Count(), total)
	require.Len(t, xs, 4)
	assert.Zero(t, xs[0])
	var early []float64
	for x := range h.Buckets() {
		early = append(early, x)
		break
	}
	assert.Len(t, early, 1, "iteration stops when asked")
}

func TestNearestRank(t *testing.T) {
	v := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for p, want := range map[float64]int64{-5: 1, 0: 1, 10: 1, 11: 2, 50: 5, 90: 9, 99: 10, 100: 10, 120: 10} {
		assert.Equal(t, want, NearestRank(v, p), "p%v", p)
	}
	assert.Equal(t, 2.5, NearestRank([]float64{2.5}, 99))
}
