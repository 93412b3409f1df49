//go:build !(linux && cgo && nvml)

package capture

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenNVMLStubSaysHowToBuild: the default build has no NVML, and says
// which build tag brings it.
func TestOpenNVMLStubSaysHowToBuild(t *testing.T) {
	mon, err := OpenNVML()
	require.Error(t, err)
	assert.Nil(t, mon)
	assert.True(t, errors.Is(err, ErrNoNVML), "%v does not wrap ErrNoNVML", err)
	for _, want := range []string{"built without NVML", "-tags nvml"} {
		assert.Contains(t, err.Error(), want)
	}
}
