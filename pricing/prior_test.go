package pricing

import (
	"strings"
	"testing"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/fpm"
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
		{"a model the database does not price", "H200", "gpt-oss-20b", "roofline(H200-SXM, gpt-oss-20b)", "prior: the roofline: the kernel database of H200-SXM does not price gpt-oss-20b (opdb h200-sxm-vllm-0.24.0: no mxfp4 GEMMs measured"},
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

// A triton attention backend's decode kernel walks each request's KV on
// one program per KV head: an ops prior over a database whose kernel
// splits the walk (no SM count) prices its ragged batches by the longest
// request over the catalogue's wave, and says so; a database that gives
// its SM count, another backend, or an artifact keep their own rule.
func TestAttentionBackendWave(t *testing.T) {
	hw, err := catalog.LookupHardware("H200")
	require.NoError(t, err)
	shape, err := catalog.LookupModel("Llama-3.1-8B")
	require.NoError(t, err)
	wave := func(fpmSpec, backend string) (float64, []string) {
		p, err := Price(Spec{Hardware: hw, Shape: shape, FPM: fpmSpec, AttentionBackend: backend})
		require.NoError(t, err)
		o, ok := p.FPM.(*fpm.Ops)
		require.True(t, ok)
		return o.Engine().DecodeWave, p.Notes
	}
	w, notes := wave(FPMPrior, "triton")
	assert.Equal(t, float64(hw.SMs*hw.AttnProgramsPerSM), w)
	assert.Equal(t, 396.0, w, "H200-SXM: 132 SMs × 3")
	assert.Contains(t, strings.Join(notes, "\n"), "a ragged decode batch is priced by its longest request over a wave of 396 programs")
	for _, c := range [][2]string{{FPMPrior, "FLASH_ATTN"}, {FPMPrior, ""}, {"ops:h200-sxm-worker", "triton"}} {
		w, _ := wave(c[0], c[1])
		assert.Zero(t, w, "%s with %q", c[0], c[1])
	}
}
