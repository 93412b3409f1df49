package invariants

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFailf(t *testing.T) {
	assert.PanicsWithValue(t, "invariant violated: pool: 3 free > 2 usable", func() { Failf("pool: %d free > %d usable", 3, 2) })
}
