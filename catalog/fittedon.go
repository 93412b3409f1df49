package catalog

import (
	"cmp"
	"strings"
)

// FittedOn is one setting a model's training data ran on, as its dataset's
// manifest says: the GPU (catalogue name), the model and its weight and KV
// precision, and the serving engine. Empty fields were not recorded.
type FittedOn struct {
	GPU           string `json:"gpu,omitempty"`
	Model         string `json:"model,omitempty"`
	WeightDType   string `json:"weight_dtype,omitempty"`
	KVDType       string `json:"kv_dtype,omitempty"`
	Engine        string `json:"engine,omitempty"`
	EngineVersion string `json:"engine_version,omitempty"`
}

// RunOf is the setting a run priced on hw with shape s has (no engine).
func RunOf(hw Hardware, s Shape) FittedOn {
	return FittedOn{GPU: hw.Name, Model: s.Name, WeightDType: cmp.Or(s.WeightDType, s.DType), KVDType: cmp.Or(s.KVDType, s.DType)}.Canonical()
}

// Canonical spells f as the catalogue does, so that a recorded setting
// and a priced one compare: the GPU's and the model's catalogue names
// (kept as given when the catalogue lacks them) and canonical dtypes (the
// catalogued model's when f has none; an unknown spelling kept).
func (f FittedOn) Canonical() FittedOn {
	if f.GPU != "" {
		if hw, err := LookupHardware(f.GPU); err == nil {
			f.GPU = hw.Name
		}
	}
	if f.Model != "" {
		if s, err := LookupModel(f.Model); err == nil {
			f.Model = s.Name
			f.WeightDType = cmp.Or(f.WeightDType, s.WeightDType, s.DType)
			f.KVDType = cmp.Or(f.KVDType, s.KVDType, s.DType)
		}
	}
	for _, d := range []*string{&f.WeightDType, &f.KVDType} {
		if c, err := CanonicalDType(*d); *d != "" && err == nil {
			*d = c
		}
	}
	return f
}

// String is "H200-SXM / Llama-3.1-8B bf16", with " kv fp8" when the KV
// cache's precision differs from the weights'.
func (f FittedOn) String() string {
	s := cmp.Or(f.GPU, "unknown GPU") + " / " + cmp.Or(f.Model, "unknown model")
	if f.WeightDType != "" {
		s += " " + f.WeightDType
	}
	if f.KVDType != "" && f.KVDType != f.WeightDType {
		s += " kv " + f.KVDType
	}
	return s
}

// Covers is whether a setting the model was fitted on is the run's: every
// field both record agrees (spellings of a catalogue name aside).
func (f FittedOn) Covers(run FittedOn) bool {
	same := func(a, b string) bool { return a == "" || b == "" || strings.EqualFold(a, b) }
	return same(f.GPU, run.GPU) && same(f.Model, run.Model) && same(f.WeightDType, run.WeightDType) && same(f.KVDType, run.KVDType)
}
