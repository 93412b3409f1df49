package importers

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

func TestParseEngine(t *testing.T) {
	tests := []struct {
		in      string
		want    Engine
		wantErr string
	}{
		{in: "", want: Engine{}},
		{in: "vllm", want: Engine{Name: "vllm"}},
		{in: "vLLM@v0.19.0", want: Engine{Name: "vllm", Version: "0.19.0"}},
		{in: "sglang@0.5.2rc1", want: Engine{Name: "sglang", Version: "0.5.2rc1"}},
		{in: "vllm@x.y", wantErr: `"vllm@x.y": "x.y" is not a release (want e.g. vllm@0.19.0)`},
		{in: "sglang@0.5.2-rc1", want: Engine{Name: "sglang", Version: "0.5.2-rc1"}},
		{in: "vllm@", wantErr: `"vllm@": "" is not a release (want e.g. vllm@0.19.0)`},
		{in: "tgi@1.0", wantErr: `"tgi@1.0": unknown engine "tgi" (want vllm or sglang, optionally @VERSION, e.g. vllm@0.19.0)`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseEngine(tt.in)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// --hardware, --model and --engine fill what a benchmark result does not
// record, and replace (with a note) what it records differently.
func TestImportDescribes(t *testing.T) {
	tests := []struct {
		name, format  string
		src           string // default: a vllm-bench result (model_id meta-llama/Llama-3.1-8B-Instruct, no GPU)
		opts          Options
		gpu, model    string
		detail        map[string]string
		note, wantErr string
	}{
		{name: "nothing given", model: "meta-llama/Llama-3.1-8B-Instruct"},
		{name: "all three", opts: Options{Hardware: "H100", Model: "meta-llama/Llama-3.1-8B-Instruct", Engine: "vllm@0.19.0"},
			gpu: "H100", model: "meta-llama/Llama-3.1-8B-Instruct", detail: map[string]string{"engine": "vllm", datasets.DetailVLLMVersion: "0.19.0"}},
		{name: "another model", opts: Options{Model: "Qwen3-8B", Engine: "sglang@0.5.2"}, model: "Qwen3-8B",
			detail: map[string]string{"engine": "sglang", "sglang_version": "0.5.2"},
			note:   "model Qwen3-8B given on the command line; the source says meta-llama/Llama-3.1-8B-Instruct"},
		{name: "over a recorded release", src: "testdata/llmservingsim-rtx4090-llama-3.1-8b", format: "vllm-requests",
			opts: Options{Engine: "vllm@0.20.1"}, gpu: "NVIDIA GeForce RTX 4090", model: "meta-llama/Llama-3.1-8B",
			detail: map[string]string{datasets.DetailVLLMVersion: "0.20.1"}, note: "vllm_version 0.20.1 given on the command line; the source says 0.19.0"},
		{name: "bad engine", opts: Options{Engine: "vllm@latest"}, wantErr: `engine "vllm@latest": "latest" is not a release`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir() + "/ds"
			format, src := orDefault(tt.format, "vllm-bench"), orDefault(tt.src, "testdata/bench-serving/vllm_bench_serve.json")
			res, err := Import(format, src, dir, tt.opts)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.NoDirExists(t, dir)
				return
			}
			require.NoError(t, err)
			m, err := datasets.ReadManifest(dir)
			require.NoError(t, err)
			if tt.gpu == "" {
				require.Nil(t, m.Hardware)
			} else {
				require.Equal(t, tt.gpu, m.Hardware.GPUName)
			}
			require.Equal(t, tt.model, m.Model.Name)
			for k, v := range tt.detail {
				require.Equal(t, v, m.Source.Detail[k], k)
			}
			if tt.note != "" {
				require.Contains(t, res.Notes, tt.note)
			}
		})
	}
}
