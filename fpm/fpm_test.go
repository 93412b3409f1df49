package fpm

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// An unknown (NaN) feature is null in JSON and NaN again when read back;
// the known ones round-trip exactly.
func TestFeaturesJSON(t *testing.T) {
	f := Features{PrefillTokens: 512, DecodeRequests: 3, DecodeKVTokens: 4096.5, DecodeMaxKVTokens: math.NaN()}
	b, err := json.Marshal(f)
	require.NoError(t, err)
	require.Contains(t, string(b), `"DecodeMaxKVTokens":null`)
	require.Contains(t, string(b), `"DecodeKVTokens":4096.5`)

	var back Features
	require.NoError(t, json.Unmarshal(b, &back))
	require.True(t, math.IsNaN(back.DecodeMaxKVTokens))
	back.DecodeMaxKVTokens, f.DecodeMaxKVTokens = 0, 0
	require.Equal(t, f, back)
}
