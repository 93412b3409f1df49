package catalog

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestExpectedExperts: k experts at T = 1, monotone in T, approaching E.
func TestExpectedExperts(t *testing.T) {
	tests := []struct{ e, k int }{{128, 8}, {256, 8}, {8, 2}, {32, 4}, {16, 16}}
	for _, tc := range tests {
		assert.InDelta(t, float64(tc.k), ExpectedExperts(tc.e, tc.k, 1), 1e-9, "E=%d k=%d", tc.e, tc.k)
		prev := 0.0
		for _, tok := range []float64{1, 2, 4, 16, 64, 256, 1024, 8192} {
			n := ExpectedExperts(tc.e, tc.k, tok)
			assert.GreaterOrEqual(t, n, prev, "monotone in tokens")
			assert.LessOrEqual(t, n, float64(tc.e))
			prev = n
		}
		assert.InDelta(t, float64(tc.e), ExpectedExperts(tc.e, tc.k, 8192), 1e-6, "a large step reads every expert")
	}
	// 128 experts, top-8: 16 tokens read ~82 (not 128, not 8).
	assert.InDelta(t, 128*(1-math.Pow(1-8.0/128, 16)), ExpectedExperts(128, 8, 16), 1e-9)
	assert.InDelta(t, 82.4, ExpectedExperts(128, 8, 16), 0.1)
	assert.Zero(t, ExpectedExperts(128, 8, 0))
	assert.Zero(t, ExpectedExperts(0, 8, 10))
}
