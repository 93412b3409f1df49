package manifest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

// TestDecodeRule: the decode kernel's launch rule is the one a capture
// recorded, else its worker generation's, else none; a recorded rule the
// walk cannot price (a rounding other than to a power of two, a count
// that is not a number) is no rule rather than a guess.
func TestDecodeRule(t *testing.T) {
	recorded := map[string]string{datasets.DetailAttentionBackend: "triton", datasets.DetailDecodeKVTileTokens: "64",
		datasets.DetailDecodeSplitPrograms: "264", datasets.DetailDecodeSplitMax: "16", datasets.DetailDecodeSplitRounding: "pow2"}
	with := func(k, v string) map[string]string {
		d := map[string]string{}
		for key, val := range recorded {
			d[key] = val
		}
		d[k] = v
		return d
	}
	for _, c := range []struct {
		name   string
		format string
		detail map[string]string
		want   DecodeRule
	}{
		{"recorded", datasets.FormatGPUWorker, recorded, DecodeRule{64, 264, 16, "recorded"}},
		{"other rounding", datasets.FormatGPUWorker, with(datasets.DetailDecodeSplitRounding, "ceil"), DecodeRule{}},
		{"not a number", datasets.FormatGPUWorker, with(datasets.DetailDecodeSplitMax, "many"), DecodeRule{}},
		{"fused worker", datasets.FormatGPUWorker, map[string]string{datasets.DetailAttentionBackend: "triton"},
			DecodeRule{32, 264, 16, "the gpu-worker's rule before captures recorded it: 32-token tiles"}},
		{"piecewise worker", datasets.FormatGPUWorker, map[string]string{datasets.DetailAttentionBackend: "triton", datasets.DetailMixedCUDAGraphMode: "piecewise"},
			DecodeRule{64, 264, 16, "the gpu-worker's rule before captures recorded it: 64-token tiles (the worker that records mixed_cuda_graph_mode)"}},
		{"torch attention", datasets.FormatGPUWorker, map[string]string{datasets.DetailAttentionBackend: "torch"}, DecodeRule{}},
		{"not a capture", "vllm-import", map[string]string{datasets.DetailAttentionBackend: "triton"}, DecodeRule{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &datasets.Manifest{Source: datasets.Source{Format: c.format, Detail: c.detail}}
			require.Equal(t, c.want, decodeRule(m, 132))
		})
	}
}
