package datasets

import (
	"math/rand/v2"
	"testing"

	"github.com/parquet-go/parquet-go/encoding/delta"
	"github.com/stretchr/testify/require"
)

// TestEncodeDeltaInt64 checks the premise of encodeDeltaInt64: whatever
// path it takes, its bytes are those of parquet-go's int64 encoder, for
// values inside, at and beyond the narrowing bound, in every order.
func TestEncodeDeltaInt64(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	gens := map[string]func(i int) int64{
		"small":      func(int) int64 { return r.Int64N(5000) },
		"bound":      func(int) int64 { return []int64{-narrowBound, narrowBound - 1, 0}[r.IntN(3)] },
		"wide":       func(int) int64 { return r.Int64N(2*narrowBound) - narrowBound },
		"past-bound": func(int) int64 { return narrowBound + r.Int64N(10) },
		"monotone":   func(i int) int64 { return int64(i) * 1_000_003 },
		"constant":   func(int) int64 { return -1 },
		"huge":       func(int) int64 { return int64(r.Uint64()) },
	}
	var scratch []int32
	for name, gen := range gens {
		for _, n := range []int{0, 1, 2, 127, 128, 129, 1000, 32768} {
			values := make([]int64, n)
			for i := range values {
				values[i] = gen(i)
			}
			// One out-of-bound value anywhere sends the page to the int64 path.
			if n > 2 && name == "small" {
				values[r.IntN(n)] = -narrowBound - 1
			}
			want, err := (&delta.BinaryPackedEncoding{}).EncodeInt64(nil, values)
			require.NoError(t, err)
			var got []byte
			got, scratch, err = encodeDeltaInt64(nil, scratch, values)
			require.NoError(t, err)
			require.Equal(t, want, got, "%s, %d values (seed %d)", name, n, seed)
		}
	}
}
