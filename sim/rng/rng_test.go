package rng

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGolden pins the derivation and the generator. If this test fails, every
// recorded simulation stops being reproducible: do not update the values
// unless that is the intent, and say so in the changelog.
func TestGolden(t *testing.T) {
	s := New(42, "workload/arrivals")
	assert.Equal(t, uint64(0x6007945e15e97607), s.Seed())
	assert.Equal(t, "workload/arrivals", s.Name())
	assert.Equal(t, uint64(0xf140cce6fe7f3dca), s.Uint64())
	assert.Equal(t, uint64(0xf49763a540cb17ca), s.Uint64())
	assert.Equal(t, uint64(0xd18ebf0f17631a21), s.Uint64())
	assert.Equal(t, 0.5294407068252649, s.Float64())
	assert.Equal(t, 444, s.IntN(1000))
	assert.Equal(t, 0.2073462268479517, s.ExpFloat64())
	assert.Equal(t, 1.658917475667293, s.NormFloat64())
	assert.Equal(t, 0.015569201508960939, s.Gamma(0.5))
	assert.Equal(t, 2.650035395713152, s.Gamma(4))

	d := New(42, "workload").Derive("arrivals")
	assert.Equal(t, uint64(0x96eefaf30ab8438), d.Seed())
	assert.Equal(t, uint64(0x4a7c39a9746f05f6), d.Uint64())
	assert.Equal(t, "workload/arrivals", d.Name())

	n := New(42, "workload").DeriveN(3)
	assert.Equal(t, uint64(0xc9f30975ab982d0f), n.Seed())
	assert.Equal(t, uint64(0x5daa460668b63426), n.Uint64())
	assert.Equal(t, "workload#3", n.Name())
}

func TestSameSeedSameStream(t *testing.T) {
	a, b := New(7, "x"), New(7, "x")
	for i := 0; i < 1000; i++ {
		require.Equal(t, a.Uint64(), b.Uint64())
	}
}

func TestStreamsDiffer(t *testing.T) {
	cases := []struct {
		name string
		a, b *Stream
	}{
		{"different names", New(1, "arrivals"), New(1, "lengths")},
		{"different roots", New(1, "arrivals"), New(2, "arrivals")},
		{"derive vs new", New(1, "a").Derive("b"), New(1, "b")},
		{"deriveN neighbours", New(1, "rep").DeriveN(0), New(1, "rep").DeriveN(1)},
		{"derive vs deriveN", New(1, "rep").Derive("0"), New(1, "rep").DeriveN(0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.NotEqual(t, tc.a.Seed(), tc.b.Seed())
			same := 0
			for i := 0; i < 64; i++ {
				if tc.a.Uint64() == tc.b.Uint64() {
					same++
				}
			}
			assert.Zero(t, same)
		})
	}
}

// TestIndependence: drawing from one stream, or deriving children from it,
// never changes another stream's numbers.
func TestIndependence(t *testing.T) {
	ref := New(99, "lengths")
	want := make([]uint64, 100)
	for i := range want {
		want[i] = ref.Uint64()
	}

	other := New(99, "arrivals")
	for i := 0; i < 12345; i++ {
		other.Float64()
	}
	parent := New(99, "lengths")
	_ = parent.Derive("child").Uint64()
	_ = parent.DeriveN(5).Uint64()
	for i := range want {
		require.Equal(t, want[i], parent.Uint64(), "draw %d", i)
	}

	// A child does not depend on how far its parent has advanced.
	p1, p2 := New(5, "p"), New(5, "p")
	for i := 0; i < 10; i++ {
		p2.Uint64()
	}
	assert.Equal(t, p1.Derive("c").Uint64(), p2.Derive("c").Uint64())
	assert.Equal(t, p1.DeriveN(2).Uint64(), p2.DeriveN(2).Uint64())
}

func TestCorrelationSmall(t *testing.T) {
	// Streams of adjacent repetitions should be uncorrelated.
	a, b := New(3, "w").DeriveN(0), New(3, "w").DeriveN(1)
	const n = 100000
	var sa, sb, sab, saa, sbb float64
	for i := 0; i < n; i++ {
		x, y := a.Float64(), b.Float64()
		sa += x
		sb += y
		sab += x * y
		saa += x * x
		sbb += y * y
	}
	cov := sab/n - sa/n*sb/n
	r := cov / math.Sqrt((saa/n-sa*sa/n/n)*(sbb/n-sb*sb/n/n))
	assert.Less(t, math.Abs(r), 0.02)
}

func TestGammaMoments(t *testing.T) {
	for _, k := range []float64{0.25, 0.5, 1, 2.5, 16} {
		s := New(11, "gamma")
		const n = 200000
		var sum, sq float64
		for i := 0; i < n; i++ {
			x := s.Gamma(k)
			require.GreaterOrEqual(t, x, 0.0)
			sum += x
			sq += x * x
		}
		mean := sum / n
		vari := sq/n - mean*mean
		assert.InDelta(t, k, mean, 0.02*k+0.01, "shape %v mean", k)
		assert.InDelta(t, k, vari, 0.05*k+0.01, "shape %v variance", k)
	}
	assert.Panics(t, func() { New(1, "g").Gamma(0) })
	assert.Panics(t, func() { New(1, "g").Gamma(math.NaN()) })
}

func TestMix64Stable(t *testing.T) {
	assert.Equal(t, uint64(0xe220a8397b1dcdaf), Mix64(0))
	assert.NotEqual(t, Mix64(1), Mix64(2))
}

func BenchmarkFloat64(b *testing.B) {
	s := New(1, "bench")
	b.ReportAllocs()
	var x float64
	for b.Loop() {
		x += s.Float64()
	}
	_ = x
}
