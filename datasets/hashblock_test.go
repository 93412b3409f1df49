package datasets

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestManifestHashBlockSize(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    *Manifest
		want int
		err  string
	}{
		{name: "no manifest"},
		{name: "no workload", m: &Manifest{}},
		{name: "no key", m: &Manifest{Workload: &Workload{Params: map[string]string{"format": "mooncake"}}}},
		{name: "recorded", m: &Manifest{Workload: &Workload{Params: map[string]string{ParamHashBlockSize: "512"}}}, want: 512},
		{name: "zero", m: &Manifest{Workload: &Workload{Params: map[string]string{ParamHashBlockSize: "0"}}}, err: `workload.params.hash_block_size="0": must be a token count >= 1`},
		{name: "not a number", m: &Manifest{Workload: &Workload{Params: map[string]string{ParamHashBlockSize: "16k"}}}, err: `"16k"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := tc.m.HashBlockSize()
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, n)
		})
	}
}
