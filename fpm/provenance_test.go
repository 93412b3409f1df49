package fpm

import (
	"testing"

	"github.com/steplab/steplab/catalog"
	"github.com/stretchr/testify/require"
)

func TestProvenanceNotes(t *testing.T) {
	h200 := catalog.FittedOn{GPU: "H200-SXM", Model: "Llama-3.1-8B", WeightDType: catalog.DTypeBF16, KVDType: catalog.DTypeBF16}
	h100 := catalog.FittedOn{GPU: "H100-SXM", Model: "Llama-3.1-8B", WeightDType: catalog.DTypeBF16, KVDType: catalog.DTypeBF16}
	fitted := func(on ...catalog.FittedOn) *Artifact {
		return &Artifact{Training: Training{Datasets: []DatasetRef{{ID: "d"}}, FittedOn: on}}
	}
	with := func(f catalog.FittedOn, edit func(*catalog.FittedOn)) catalog.FittedOn { edit(&f); return f }
	for _, tc := range []struct {
		name string
		a    *Artifact
		run  catalog.FittedOn
		want []string // substrings of the one note; nil: no note
	}{
		{"same setting", fitted(h200), h200, nil},
		{"another spelling of the GPU", fitted(h200), with(h200, func(f *catalog.FittedOn) { f.GPU = "h200-sxm" }), nil},
		{"run records no precision", fitted(h200), with(h200, func(f *catalog.FittedOn) { f.WeightDType, f.KVDType = "", "" }), nil},
		{"other GPU", fitted(h200), with(h200, func(f *catalog.FittedOn) { f.GPU = "RTX-4090" }),
			[]string{"fpm m.json was fitted on H200-SXM / Llama-3.1-8B bf16; applied to RTX-4090 / Llama-3.1-8B bf16: its error there is unmeasured"}},
		{"other model", fitted(h200), with(h200, func(f *catalog.FittedOn) { f.Model = "Qwen2.5-7B" }),
			[]string{"fitted on H200-SXM / Llama-3.1-8B bf16; applied to H200-SXM / Qwen2.5-7B bf16"}},
		{"other weight precision", fitted(h200), with(h200, func(f *catalog.FittedOn) { f.WeightDType = catalog.DTypeFP8 }),
			[]string{"applied to H200-SXM / Llama-3.1-8B fp8 kv bf16"}},
		{"other KV precision", fitted(h200), with(h200, func(f *catalog.FittedOn) { f.KVDType = catalog.DTypeFP8 }),
			[]string{"applied to H200-SXM / Llama-3.1-8B bf16 kv fp8"}},
		{"fitted on two GPUs, run on one", fitted(h200, h100), h100, nil},
		{"fitted on two GPUs, run on a third", fitted(h200, h100), with(h200, func(f *catalog.FittedOn) { f.GPU = "RTX-4090" }),
			[]string{"fitted on H200-SXM / Llama-3.1-8B bf16 and H100-SXM / Llama-3.1-8B bf16; applied to RTX-4090"}},
		{"no record", fitted(), h200,
			[]string{"fpm m.json records no training.fitted_on (fitted before steplab recorded it): its provenance is unknown; applied to H200-SXM / Llama-3.1-8B bf16"}},
		{"no record, run's GPU unknown", fitted(), with(h200, func(f *catalog.FittedOn) { f.GPU = "" }), nil},
		{"other GPU, run's GPU unknown", fitted(h200), with(h100, func(f *catalog.FittedOn) { f.GPU = "" }), nil},
		{"no training datasets (hand-written)", &Artifact{}, h200, nil},
		{"no artifact (a prior)", nil, h200, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notes := ProvenanceNotes("m.json", tc.a, tc.run)
			if tc.want == nil {
				require.Empty(t, notes)
				return
			}
			require.Len(t, notes, 1)
			for _, w := range tc.want {
				require.Contains(t, notes[0], w)
			}
		})
	}
}

func TestFittedOnCanonical(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in, want catalog.FittedOn
	}{
		{"catalogue spellings", catalog.FittedOn{GPU: "NVIDIA H200", Model: "Llama-3.1-8B", WeightDType: "bfloat16", KVDType: "bfloat16"},
			catalog.FittedOn{GPU: "H200-SXM", Model: "Llama-3.1-8B", WeightDType: catalog.DTypeBF16, KVDType: catalog.DTypeBF16}},
		{"dtypes from the catalogue", catalog.FittedOn{GPU: "NVIDIA GeForce RTX 4090", Model: "Llama-3.1-8B"},
			catalog.FittedOn{GPU: "RTX-4090", Model: "Llama-3.1-8B", WeightDType: catalog.DTypeBF16, KVDType: catalog.DTypeBF16}},
		{"unknown names kept", catalog.FittedOn{GPU: "Acme X1", Model: "my-model", WeightDType: "weird"},
			catalog.FittedOn{GPU: "Acme X1", Model: "my-model", WeightDType: "weird"}},
		{"empty stays empty", catalog.FittedOn{}, catalog.FittedOn{}},
	} {
		t.Run(tc.name, func(t *testing.T) { require.Equal(t, tc.want, tc.in.Canonical()) })
	}
}

func TestAddFittedOn(t *testing.T) {
	a, b := catalog.FittedOn{GPU: "A"}, catalog.FittedOn{GPU: "B"}
	require.Equal(t, []catalog.FittedOn{a, b}, AddFittedOn(AddFittedOn(AddFittedOn(AddFittedOn(nil, a), catalog.FittedOn{}), b), a))
}
