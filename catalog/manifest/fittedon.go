package manifest

import (
	"cmp"
	"strconv"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/datasets"
)

// FittedOn is the setting a dataset's manifest records, spelled as the
// catalogue does (catalog.FittedOn.Canonical), with vLLM's version when the
// source recorded it.
func FittedOn(m *datasets.Manifest) catalog.FittedOn {
	var f catalog.FittedOn
	if m == nil {
		return f
	}
	if h := m.Hardware; h != nil {
		f.GPU = h.GPUName
	}
	if ms := m.Model; ms != nil {
		f.Model, f.WeightDType, f.KVDType = ms.Name, cmp.Or(ms.WeightDType, ms.DType), cmp.Or(ms.KVDType, ms.DType)
	}
	if v := m.Source.Detail[datasets.DetailVLLMVersion]; v != "" {
		f.Engine, f.EngineVersion = "vllm", v
	}
	return f.Canonical()
}

// DecodeAttention is what a decode attention kernel's walk (fpm.DecodeWalk)
// needs from a manifest: the GPU's SM count, the attention programs an SM
// runs at once and the KV tile it was measured with (the hardware
// catalogue; 0 where it has no figure), the model's KV heads per GPU
// (kv_heads over tensor_parallel), and the kernel's split-KV launch rule
// (DecodeRule).
type DecodeAttention struct {
	SMs, ProgramsPerSM, ProgramsTileTokens, KVHeads int
	Rule                                            DecodeRule
}

// DecodeRule is a decode attention kernel's split-KV launch rule
// (fpm.DecodeKernel's fields) and where it was read. The zero value: not
// known.
type DecodeRule struct {
	TileTokens, SplitPrograms, SplitMax int
	// Source says where the rule came from: "recorded" (the manifest's
	// source.detail), or the worker generation whose rule it is.
	Source string `json:"-"`
}

// The decode kernel of steplab's worker (capture/worker/attention.py,
// TritonAttention) before its captures recorded the rule: it splits a
// decode batch's KV walk until the launch has two programs per SM
// (num_splits: next_pow2(⌈2·SMs/(B·KV heads)⌉), at most 16) and walks
// 32-token tiles, 64-token ones from the commit that made its ready
// message report the mixed steps' CUDA-graph mode (the manifests'
// mixed_cuda_graph_mode): the two changed together.
const (
	workerSplitProgramsPerSM  = 2
	workerSplitMax            = 16
	workerTileTokens          = 32
	workerTileTokensPiecewise = 64
)

// DecodeAttentionOf reads m's DecodeAttention: zeros when the manifest or
// the catalogue does not say (the rule alone is read without the
// catalogue only where it is recorded).
func DecodeAttentionOf(m *datasets.Manifest) DecodeAttention {
	if m == nil || m.Hardware == nil || m.Hardware.GPUName == "" || m.Model == nil || m.Model.KVHeads <= 0 {
		return DecodeAttention{}
	}
	cat, err := catalog.DefaultCatalog()
	if err != nil {
		return DecodeAttention{}
	}
	hw, err := cat.LookupHardware(m.Hardware.GPUName)
	if err != nil || hw.SMs <= 0 {
		return DecodeAttention{}
	}
	return DecodeAttention{SMs: hw.SMs, ProgramsPerSM: hw.AttnProgramsPerSM, ProgramsTileTokens: hw.AttnKVTileTokens,
		KVHeads: max(1, m.Model.KVHeads/max(1, m.Model.TensorParallel)), Rule: decodeRule(m, hw.SMs)}
}

// decodeRule is the rule m's source.detail records, else that of the
// worker generation whose capture m is (a gpu-worker capture with the
// triton backend), else none.
func decodeRule(m *datasets.Manifest, sms int) DecodeRule {
	d := m.Source.Detail
	var r DecodeRule
	n := 0
	for _, f := range []struct {
		key string
		v   *int
	}{{datasets.DetailDecodeKVTileTokens, &r.TileTokens}, {datasets.DetailDecodeSplitPrograms, &r.SplitPrograms}, {datasets.DetailDecodeSplitMax, &r.SplitMax}} {
		if s, ok := d[f.key]; ok {
			v, err := strconv.Atoi(s)
			if err != nil || v < 0 {
				return DecodeRule{}
			}
			*f.v = v
			n++
		}
	}
	if s, ok := d[datasets.DetailDecodeSplitRounding]; ok && s != "pow2" {
		return DecodeRule{} // the walk prices a part count rounded up to a power of two, and no other
	}
	switch {
	case n == 3:
		r.Source = "recorded"
		return r
	case n > 0 || m.Source.Format != datasets.FormatGPUWorker || d[datasets.DetailAttentionBackend] != "triton":
		return DecodeRule{}
	}
	r = DecodeRule{TileTokens: workerTileTokens, SplitPrograms: workerSplitProgramsPerSM * sms, SplitMax: workerSplitMax,
		Source: "the gpu-worker's rule before captures recorded it: 32-token tiles"}
	if d[datasets.DetailMixedCUDAGraphMode] != "" {
		r.TileTokens, r.Source = workerTileTokensPiecewise, "the gpu-worker's rule before captures recorded it: 64-token tiles (the worker that records mixed_cuda_graph_mode)"
	}
	return r
}
