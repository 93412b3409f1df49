package model

import (
	"cmp"
	"fmt"
	"slices"
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

// covers is whether a setting the model was fitted on is the run's: every
// field both record agrees (spellings of a catalogue name aside).
func (f FittedOn) covers(run FittedOn) bool {
	same := func(a, b string) bool { return a == "" || b == "" || strings.EqualFold(a, b) }
	return same(f.GPU, run.GPU) && same(f.Model, run.Model) && same(f.WeightDType, run.WeightDType) && same(f.KVDType, run.KVDType)
}

// AddFittedOn appends f to list unless it is there already: the distinct
// settings of a model's training datasets, in their order.
func AddFittedOn(list []FittedOn, f FittedOn) []FittedOn {
	if f == (FittedOn{}) || slices.Contains(list, f) {
		return list
	}
	return append(list, f)
}

// ProvenanceNotes say where the artifact a (named name) prices runs it
// was not fitted on: one note per run whose GPU, model or precision none of
// its training datasets had, whose error no one has measured. An artifact
// fitted from datasets before the record existed gets one note that its
// provenance is unknown. Runs whose GPU is not known are skipped (nothing
// to compare), as is an artifact with no training datasets (a
// hand-written or prior artifact).
func ProvenanceNotes(name string, a *Artifact, runs ...FittedOn) []string {
	runs = slices.DeleteFunc(slices.Clone(runs), func(r FittedOn) bool { return r.GPU == "" })
	if a == nil || len(runs) == 0 || len(a.Training.Datasets) == 0 {
		return nil
	}
	fitted := a.Training.FittedOn
	if len(fitted) == 0 {
		return []string{fmt.Sprintf("fpm %s records no training.fitted_on (fitted before steplab recorded it): its provenance is unknown; applied to %s",
			name, joinSettings(runs))}
	}
	var notes []string
	for _, run := range runs {
		if !slices.ContainsFunc(fitted, func(f FittedOn) bool { return f.covers(run) }) {
			notes = append(notes, fmt.Sprintf("fpm %s was fitted on %s; applied to %s: its error there is unmeasured", name, joinSettings(fitted), run))
		}
	}
	return notes
}

func joinSettings(fs []FittedOn) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = f.String()
	}
	return strings.Join(s, " and ")
}
