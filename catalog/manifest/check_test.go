package manifest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/validate"
	"github.com/stretchr/testify/require"
)

const bundled = "../../datasets/h200/traffic-azure-5rps"

// TestManifestValues: settings no catalogued model or GPU allows are
// errors naming the field; what cannot be checked is a warning.
func TestManifestValues(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(m *datasets.Manifest)
		field string
		level validate.Level
		want  string
	}{
		{"layers beyond any model", func(m *datasets.Manifest) { m.Model.Layers = 1_000_000_000 }, "model.layers", validate.Error, "beyond any known model"},
		{"negative hidden", func(m *datasets.Manifest) { m.Model.Hidden = -4096 }, "model.hidden", validate.Error, "negative value -4096"},
		{"heads not a multiple of kv heads", func(m *datasets.Manifest) { m.Model.Heads = 33 }, "model", validate.Error, "33 heads are not a multiple of 8 KV heads"},
		{"tp not dividing heads", func(m *datasets.Manifest) { m.Model.TensorParallel = 3 }, "model", validate.Error, "not divisible by TP=3"},
		{"graph sizes not increasing", func(m *datasets.Manifest) { m.CUDAGraphSizes = []int{1, 4, 2} }, "cuda_graph_capture_sizes", validate.Error, "entry 2 is 2"},
		{"graph size not positive", func(m *datasets.Manifest) { m.CUDAGraphSizes = []int{0, 8} }, "cuda_graph_capture_sizes", validate.Error, "entry 0 is 0"},
		{"kv cache beyond memory", func(m *datasets.Manifest) { m.Engine.NumGPUBlocks = 10_000_000 }, "engine.num_gpu_blocks", validate.Error, "do not fit H200-SXM"},
		{"memory beyond the GPU", func(m *datasets.Manifest) { m.Hardware.MemTotalBytes = 1e13 }, "hardware.mem_total_bytes", validate.Error, "more than H200-SXM has"},
		{"unknown gpu", func(m *datasets.Manifest) { m.Hardware.GPUName = "Foo GPU" }, "hardware.gpu_name", validate.Warning, "not in the hardware catalogue"},
		{"gpu name a path", func(m *datasets.Manifest) { m.Hardware.GPUName = "../../etc/gpu.yaml" }, "hardware.gpu_name", validate.Warning, "is a path"},
		{"unknown model", func(m *datasets.Manifest) { m.Model.Name = "My-Model" }, "model.name", validate.Warning, "not in the model catalogue"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ds")
			require.NoError(t, os.CopyFS(dir, os.DirFS(bundled)))
			m, err := datasets.ReadManifest(dir)
			require.NoError(t, err)
			tc.edit(m)
			require.NoError(t, datasets.WriteManifest(dir, m))
			rep, err := validate.Dataset(dir, validate.Options{Settings: Check})
			require.NoError(t, err)
			var got []string
			for _, v := range rep.Violations {
				if v.Field == tc.field && v.Level == tc.level {
					got = append(got, v.Message)
				}
			}
			require.Len(t, got, 1, "violations: %v", rep.Violations)
			require.Contains(t, got[0], tc.want)
		})
	}
	rep, err := validate.Dataset(bundled, validate.Options{Settings: Check})
	require.NoError(t, err)
	for _, v := range rep.Violations {
		require.NotEqual(t, validate.TableManifest, v.Table, "the bundled dataset: %v", v)
	}
}
