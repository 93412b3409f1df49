package manifest

import (
	"cmp"

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

// KVSplit is what a decode attention kernel's split regime
// (fpm.SplitKVLength) needs from a manifest: the GPU's SM count and the
// attention programs an SM runs at once, from the hardware catalogue (0
// where it has no figure), and the model's KV heads per GPU (kv_heads over
// tensor_parallel). Zeros when the manifest or the catalogue does not say.
func KVSplit(m *datasets.Manifest) (sms, perSM, kvHeads int) {
	if m == nil || m.Hardware == nil || m.Hardware.GPUName == "" || m.Model == nil || m.Model.KVHeads <= 0 {
		return 0, 0, 0
	}
	cat, err := catalog.DefaultCatalog()
	if err != nil {
		return 0, 0, 0
	}
	hw, err := cat.LookupHardware(m.Hardware.GPUName)
	if err != nil || hw.SMs <= 0 {
		return 0, 0, 0
	}
	return hw.SMs, hw.AttnProgramsPerSM, max(1, m.Model.KVHeads/max(1, m.Model.TensorParallel))
}
