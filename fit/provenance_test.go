package fit

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
)

// A fit records the settings of its datasets (both, when they disagree),
// and eval and check of the artifact on another GPU's data warn, naming
// both; on one of its own GPUs they stay quiet.
func TestFittedOnRecordedAndChecked(t *testing.T) {
	dir := t.TempDir()
	on := func(name, gpu string, seed uint64) string {
		m := datasets.Manifest{Name: name, Source: datasets.Source{Kind: "test", Detail: map[string]string{datasets.DetailVLLMVersion: "0.11.0"}},
			Hardware: &datasets.Hardware{GPUName: gpu}, Model: &datasets.ModelShape{Name: "Llama-3.1-8B", DType: "bfloat16"}}
		return writeManifestDataset(t, filepath.Join(dir, name), synthDecode(200, seed), m)
	}
	h200, h100, rtx := on("h200", "NVIDIA H200", 1), on("h100", "H100-SXM", 2), on("rtx", "NVIDIA GeForce RTX 4090", 3)
	_, art, _, err := FitDatasets([]string{h200, h100, h200}, FitConfig{Form: fpm.FormLinear, Linear: Options{Terms: []string{"const", "decode_requests", "decode_kv_tokens"}}, CreatedBy: "test"})
	require.NoError(t, err)
	want := catalog.FittedOn{GPU: "H200-SXM", Model: "Llama-3.1-8B", WeightDType: "bf16", KVDType: "bf16", Engine: "vllm", EngineVersion: "0.11.0"}
	other := want
	other.GPU = "H100-SXM"
	require.Equal(t, []catalog.FittedOn{want, other}, art.Training.FittedOn)
	m, err := art.Model()
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		data string
		note string // "" for none
	}{
		{"its own GPU", h100, ""},
		{"another GPU", rtx, "fpm m.json was fitted on H200-SXM / Llama-3.1-8B bf16 and H100-SXM / Llama-3.1-8B bf16; applied to RTX-4090 / Llama-3.1-8B bf16: its error there is unmeasured"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, _, err := EvalModel(m, art, "m.json", []string{tc.data}, EvalConfig{})
			require.NoError(t, err)
			ck, err := CheckModel(m, art, "m.json", []string{tc.data}, LoadOptions{}, CheckOptions{MaxMAPE: 100})
			require.NoError(t, err)
			if tc.note == "" {
				require.Empty(t, ev.Warnings)
				require.Empty(t, ck.Warnings)
				return
			}
			require.Equal(t, []string{tc.note}, ev.Warnings)
			require.Equal(t, []string{tc.note}, ck.Warnings)
		})
	}
}
