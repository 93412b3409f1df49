package pricing

import (
	"testing"

	"github.com/steplab/steplab/catalog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fpm: prior is the measured-operations prior where a kernel database is
// shipped for the GPU and prices the model, else the roofline, with a
// note saying which and why.
func TestPriorSpec(t *testing.T) {
	for _, c := range []struct {
		name, hw, shape, want, note string
	}{
		{"a shipped database", "H200", "Llama-3.1-8B", "ops(h200-sxm-vllm-0.24.0, Llama-3.1-8B)", "prior: ops, the kernels measured on H200-SXM"},
		{"no database for the GPU", "RTX 4090", "Llama-3.1-8B", "roofline(RTX-4090, Llama-3.1-8B)", "prior: the roofline: no kernel database is shipped for RTX-4090"},
		{"a model the database does not price", "H200", "gpt-oss-20b", "roofline(H200-SXM, gpt-oss-20b)", "prior: the roofline: the kernel database of H200-SXM does not price gpt-oss-20b (fpm: opdb h200-sxm-vllm-0.24.0: no mxfp4 GEMMs measured"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hw, err := catalog.LookupHardware(c.hw)
			require.NoError(t, err)
			shape, err := catalog.LookupModel(c.shape)
			require.NoError(t, err)
			p, err := Price(Spec{Hardware: hw, Shape: shape, FPM: FPMPrior})
			require.NoError(t, err)
			assert.Equal(t, c.want, Name(p))
			require.NotEmpty(t, p.Notes)
			assert.Contains(t, p.Notes[len(p.Notes)-1], c.note)
			assert.True(t, IsPrior(FPMPrior))
		})
	}
}
