package suggest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"", "ab", 2}, {"kitten", "sitting", 3},
		{"h200", "h100", 1}, {"gpu_time_ns", "gpu_time", 3}, {"flaw", "lawn", 2},
	} {
		assert.Equal(t, tc.want, Distance(tc.a, tc.b), "%q %q", tc.a, tc.b)
		assert.Equal(t, tc.want, Distance(tc.b, tc.a), "symmetric: %q %q", tc.b, tc.a)
	}
}
