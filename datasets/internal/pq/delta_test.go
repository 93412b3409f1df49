package pq

import (
	"testing"

	"github.com/parquet-go/parquet-go/encoding/delta"
	"github.com/stretchr/testify/require"
)

// TestDeltaInt32PathSameBytes checks the premise of narrowBound: for values
// within it, parquet-go's int32 delta encoder writes the bytes of its int64
// one, at the bound, inside it and in every order.
func TestDeltaInt32PathSameBytes(t *testing.T) {
	r := seededRand(t)
	gens := map[string]func(i int) int64{
		"small":    func(int) int64 { return r.Int64N(5000) },
		"bound":    func(int) int64 { return []int64{-narrowBound, narrowBound - 1, 0}[r.IntN(3)] },
		"wide":     func(int) int64 { return r.Int64N(2*narrowBound) - narrowBound },
		"monotone": func(i int) int64 { return int64(i) * 16_411 },
		"constant": func(int) int64 { return -1 },
	}
	for name, gen := range gens {
		for _, n := range []int{0, 1, 2, 127, 128, 129, 1000, PageRows} {
			values := make([]int64, n)
			narrow := make([]int32, n)
			for i := range values {
				values[i] = gen(i)
				narrow[i] = int32(values[i])
			}
			want, err := (&delta.BinaryPackedEncoding{}).EncodeInt64(nil, values)
			require.NoError(t, err)
			got, err := (&delta.BinaryPackedEncoding{}).EncodeInt32(nil, narrow)
			require.NoError(t, err)
			require.Equal(t, want, got, "%s, %d values", name, n)
		}
	}
}

type deltaRow struct {
	V int64 `parquet:"v,delta"`
}

// TestNarrowPagesRoundTrip writes an int64 delta column whose pages start
// within narrowBound and leave it part way (and the other way round), so
// that pages are gathered narrow, turn wide mid-page and start narrow again,
// and reads every value back.
func TestNarrowPagesRoundTrip(t *testing.T) {
	r := seededRand(t)
	rows := make([]deltaRow, 3*PageRows+77)
	for i := range rows {
		switch {
		case i%PageRows == PageRows/2: // one wide value mid-page
			rows[i].V = narrowBound + r.Int64N(1<<40)
		case i/PageRows == 1 && i%PageRows > PageRows/2: // the rest of that page wide too
			rows[i].V = -narrowBound - 1 - r.Int64N(1<<20)
		default:
			rows[i].V = r.Int64N(2*narrowBound) - narrowBound
		}
	}
	// Batches (writeFile's 100 rows) do not align with pages, so a page
	// turns wide inside one.
	require.Equal(t, rows, readFile[deltaRow](t, writeFile(t, rows, 2*PageRows)))
}
