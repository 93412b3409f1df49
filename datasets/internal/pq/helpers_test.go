package pq

import (
	"bytes"
	"flag"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"
)

var flagSeed = flag.Uint64("pq.seed", 0, "seed for the randomized tests (0: a fresh one)")

// seededRand is the random source of a randomized test: a fresh seed, or
// -pq.seed; the seed is logged so that a failure can be replayed.
func seededRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := *flagSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay with -pq.seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, 0))
}

// writeFile writes rows as one file of row groups of rowGroupRows, in
// batches of 100 rows (which do not align with pages).
func writeFile[T any](t testing.TB, rows []T, rowGroupRows int) []byte {
	t.Helper()
	c, err := CodecFor(reflect.TypeFor[T]())
	require.NoError(t, err)
	var out bytes.Buffer
	w, err := c.NewWriter(&out, WriterOptions{RowGroupRows: rowGroupRows, CreatedBy: "steplab pq test"})
	require.NoError(t, err)
	for i := 0; i < len(rows); i += 100 {
		require.NoError(t, WriteRows(w, rows[i:min(i+100, len(rows))]))
	}
	require.NoError(t, w.Close())
	return out.Bytes()
}

// readFile reads every row of the file b.
func readFile[T any](t testing.TB, b []byte) []T {
	t.Helper()
	c, err := CodecFor(reflect.TypeFor[T]())
	require.NoError(t, err)
	r := bytes.NewReader(b)
	pf, err := parquet.OpenFile(r, int64(len(b)), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	require.NoError(t, err)
	rd, err := c.NewReader("test.parquet", r, int64(len(b)), pf, nil, nil)
	require.NoError(t, err)
	defer rd.Close()
	var out []T
	buf := make([]T, 4096)
	for {
		n, err := ReadRows(rd, buf)
		require.NoError(t, err)
		if n == 0 {
			return out
		}
		out = append(out, buf[:n]...)
	}
}
