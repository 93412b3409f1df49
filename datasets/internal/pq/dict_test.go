package pq

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

type dictRow struct {
	S string `parquet:"s,dict"`
}

// TestDictPointerCache writes a dictionary column through the writer's
// pointer cache in every way it can be fooled: the same bytes behind
// different pointers, different bytes sharing a prefix of one buffer
// (same pointer, other length), more strings than cache slots, unset
// strings (a nil pointer) beside empty ones that point into a buffer, and
// row groups that reset the dictionary. Every value must read back.
func TestDictPointerCache(t *testing.T) {
	r := seededRand(t)
	buf := "request-0123456789"
	var names []string
	for i := range 3 * dictRecent {
		names = append(names, "req-"+strconv.Itoa(i))
	}
	rows := make([]dictRow, 100_000)
	for i := range rows {
		switch r.IntN(5) {
		case 0: // one header, reused
			rows[i].S = names[r.IntN(300)]
		case 1: // the same bytes, a fresh pointer each time
			rows[i].S = string([]byte(names[r.IntN(300)]))
		case 2: // one pointer, several lengths
			rows[i].S = buf[:r.IntN(len(buf)+1)]
		case 3: // unset, or empty at some pointer into buf
			if r.IntN(2) == 0 {
				k := r.IntN(len(buf))
				rows[i].S = buf[k:k]
			}
		default: // many strings: slots collide
			rows[i].S = names[r.IntN(len(names))]
		}
	}
	got := readFile[dictRow](t, writeFile(t, rows, 30_000))
	require.Len(t, got, len(rows))
	for i := range rows { // row by row: a diff of the whole tables takes minutes
		require.Equal(t, rows[i].S, got[i].S, "row %d", i)
	}
}
