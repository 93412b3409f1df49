package slab

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSlabDistinctZeroValues(t *testing.T) {
	var s Slab[[3]int]
	seen := map[*[3]int]bool{}
	for i := range 3*chunk + 1 {
		v := s.New()
		require.Equal(t, [3]int{}, *v, "value %d is zero", i)
		require.False(t, seen[v], "value %d is new", i)
		seen[v] = true
		v[0] = i
	}
	assert.Len(t, seen, 3*chunk+1)
}

func TestSlabAllocatesByChunk(t *testing.T) {
	var s Slab[int64]
	allocs := testing.AllocsPerRun(10, func() {
		for range chunk {
			s.New()
		}
	})
	assert.Equal(t, 1.0, allocs, "one allocation a chunk")
}
