package pq

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// packBools writes the bitmap a flag at a time would: every length around
// the eight-flag words, every single flag set, and dense patterns.
func TestPackBools(t *testing.T) {
	slow := func(flags []byte) []byte {
		out := make([]byte, (len(flags)+7)/8)
		for i, f := range flags {
			out[i/8] |= f << (i % 8)
		}
		return out
	}
	var cases [][]byte
	for n := 0; n <= 33; n++ {
		for set := 0; set < n; set++ { // one flag set
			f := make([]byte, n)
			f[set] = 1
			cases = append(cases, f)
		}
		all, alt := make([]byte, n), make([]byte, n)
		for i := range all {
			all[i] = 1
			alt[i] = byte(i % 3 % 2)
		}
		cases = append(cases, all, alt, make([]byte, n))
	}
	for _, flags := range cases {
		require.Equal(t, slow(flags), packBools([]byte{0xAA}, flags)[1:], "flags %v", flags)
	}
}
