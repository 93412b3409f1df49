package manifest

import (
	"cmp"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/model"
)

// FittedOn is the setting a dataset's manifest records, spelled as the
// catalogue does (model.FittedOn.Canonical), with vLLM's version when the
// source recorded it.
func FittedOn(m *datasets.Manifest) model.FittedOn {
	var f model.FittedOn
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
