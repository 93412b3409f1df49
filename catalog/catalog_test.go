package catalog

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCatalogHardwareSpellings: every spelling a user meets — NVML's
// device names, vLLM's and LLMServingSim's folder names, AIConfigurator's
// system names, short names — resolves through the spec files' aliases
// and the one normalisation rule.
func TestCatalogHardwareSpellings(t *testing.T) {
	tests := []struct{ in, want string }{
		// NVML (nvidia-smi --query-gpu=name, amd-smi).
		{"NVIDIA GeForce RTX 4090", "RTX-4090"},
		{"NVIDIA GeForce RTX 5090", "RTX-5090"},
		{"NVIDIA H100 80GB HBM3", "H100-SXM"},
		{"NVIDIA H100 PCIe", "H100-PCIe"},
		{"NVIDIA H100 NVL", "H100-NVL"},
		{"NVIDIA H200", "H200-SXM"},
		{"NVIDIA A100-SXM4-40GB", "A100-SXM-40GB"},
		{"NVIDIA A100-SXM4-80GB", "A100-SXM-80GB"},
		{"NVIDIA A100-PCIE-40GB", "A100-PCIe-40GB"},
		{"NVIDIA A100 80GB PCIe", "A100-PCIe-80GB"},
		{"NVIDIA GH200 480GB", "GH200"},
		{"NVIDIA B200", "B200"},
		{"NVIDIA L4", "L4"},
		{"NVIDIA L40S", "L40S"},
		{"NVIDIA A10G", "A10G"},
		{"NVIDIA RTX 6000 Ada Generation", "RTX-6000-Ada"},
		{"NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000-Server"},
		{"NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "RTX-PRO-6000-Workstation"},
		{"AMD Instinct MI300X", "MI300X"},
		{"AMD Instinct MI325X", "MI325X"},
		// vLLM's tuned-config file names (spaces as underscores) and
		// LLMServingSim's hardware folders.
		{"NVIDIA_H100_80GB_HBM3", "H100-SXM"},
		{"H100_80GB_HBM3", "H100-SXM"},
		{"NVIDIA_GeForce_RTX_4090", "RTX-4090"},
		{"RTX4090", "RTX-4090"},
		{"RTXPRO6000", "RTX-PRO-6000-Server"},
		// AIConfigurator's systems.
		{"h200_sxm", "H200-SXM"},
		{"b200_sxm", "B200"},
		{"rtx_pro_6000_server", "RTX-PRO-6000-Server"},
		// Short names, any case, spaces, hyphens, underscores.
		{"H200", "H200-SXM"},
		{"  h200 ", "H200-SXM"},
		{"h100-sxm", "H100-SXM"},
		{"H100_SXM", "H100-SXM"},
		{"H100", "H100-SXM"},
		{"A100", "A100-SXM-80GB"},
		{"rtx 4090", "RTX-4090"},
		{"GB200", "GB200"},
		{"mi300x", "MI300X"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			hw, err := builtin.LookupHardware(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, hw.Name)
		})
	}
}

func TestCatalogHardwareUnknown(t *testing.T) {
	_, err := builtin.LookupHardware("RTX 3090")
	require.Error(t, err)
	msg := err.Error()
	assert.Contains(t, msg, `unknown hardware "RTX 3090"`)
	assert.Contains(t, msg, "nearest known: RTX-4090", "the closest name by edit distance comes first")
	assert.Contains(t, msg, "spec file")
	assert.Contains(t, msg, CatalogEnv)
	_, err = builtin.LookupHardware("")
	assert.ErrorContains(t, err, "empty hardware name")
	_, err = builtin.LookupHardware(filepath.Join(t.TempDir(), "missing.yaml"))
	assert.ErrorContains(t, err, "missing.yaml")
}

// requiredGPUs are the devices the built-in catalogue must hold.
var requiredGPUs = []string{"A100-SXM-40GB", "A100-SXM-80GB", "A100-PCIe-80GB", "H100-SXM", "H100-PCIe", "H100-NVL",
	"H200-SXM", "GH200", "B200", "GB200", "L4", "L40S", "A10G", "RTX-4090", "RTX-5090", "RTX-6000-Ada",
	"RTX-PRO-6000-Server", "MI300X", "MI325X"}

// TestCatalogBuiltinHardware: every built-in spec file validates, the
// required devices are there, and each figure is cited: every field is
// covered by a source, and a device without measurements says its
// roofline is the generic default.
func TestCatalogBuiltinHardware(t *testing.T) {
	names := map[string]bool{}
	for _, hw := range builtin.Hardware() {
		names[hw.Name] = true
		t.Run(hw.Name, func(t *testing.T) {
			require.NoError(t, hw.Validate())
			assert.True(t, strings.HasPrefix(hw.File, "builtin:hardware/"), hw.File)
			covered := map[string]bool{}
			for _, s := range hw.Sources {
				for _, f := range s.Fields {
					covered[f] = true
					if i := strings.Index(f, "."); i > 0 {
						covered[f[:i]] = true
					}
				}
			}
			for _, f := range []string{"memory_gb", "memory_bandwidth_gbs", "tflops", "sms", "boost_clock_mhz", "interconnects", "interconnects.latency_us", "roofline"} {
				if f == "roofline" && hw.Roofline.Basis != "generic" {
					continue // the basis says what it was measured on
				}
				if f == "boost_clock_mhz" && hw.BoostClockMHz == 0 {
					continue // left out: the vendor publishes none
				}
				assert.True(t, covered[f], "no source cites %s", f)
			}
			var urls int
			for _, s := range hw.Sources {
				if s.URL != "" {
					urls++
					assert.True(t, strings.HasPrefix(s.URL, "https://"), s.URL)
				}
			}
			assert.Positive(t, urls, "cites at least one public document")
			// Dense peaks: fp16 ≥ bf16 never exceeds fp8, and fp32 is below
			// the tensor rates.
			assert.Less(t, hw.TFLOPS.FP32, hw.TFLOPS.BF16)
			if hw.TFLOPS.FP8 > 0 {
				assert.GreaterOrEqual(t, hw.TFLOPS.FP8, hw.TFLOPS.BF16)
			}
			_, ok := hw.TPLink()
			assert.True(t, ok, "every device has a GPU-to-GPU path (at least PCIe)")
		})
	}
	for _, n := range requiredGPUs {
		assert.True(t, names[n], "built-in catalogue lacks %s", n)
	}
	// The H200 keeps the measured roofline it was calibrated with; the
	// others without measurements carry the generic default.
	assert.NotEqual(t, "generic", h200.Roofline.Basis)
	assert.Equal(t, "generic", h100.Roofline.Basis)
	assert.Equal(t, GenericRoofline().GEMMEff, h200.Roofline.GEMMEff)
}

// TestCatalogModelParamCounts: every built-in config.json resolves, and
// its parameter count is within 2% of the model's published count.
func TestCatalogModelParamCounts(t *testing.T) {
	tests := []struct {
		name   string
		total  float64 // published parameter count
		active float64 // published active count (MoE; 0: not checked)
		source string
	}{
		{"Llama-3.1-8B", 8.03e9, 0, "huggingface.co/meta-llama/Llama-3.1-8B: 8,030,261,248 (safetensors)"},
		{"Llama-3.1-70B", 70.55e9, 0, "huggingface.co/meta-llama/Llama-3.1-70B: 70,553,706,496 (safetensors)"},
		{"Qwen2.5-7B", 7.61e9, 0, "huggingface.co/Qwen/Qwen2.5-7B model card: 7.61B"},
		{"Qwen3-32B", 32.8e9, 0, "huggingface.co/Qwen/Qwen3-32B model card: 32.8B"},
		{"Mistral-Nemo-Base-2407", 12.25e9, 0, "huggingface.co/mistralai/Mistral-Nemo-Base-2407: 12,247,782,400 (safetensors)"},
		{"gemma-2-9b-it", 9.24e9, 0, "huggingface.co/google/gemma-2-9b-it: 9,241,705,984 (safetensors)"},
		{"Phi-3-mini-4k-instruct", 3.821e9, 0, "keras-hub phi3_mini_4k_instruct_en preset: 3,821,079,552; model card: 3.8B"},
		{"Mixtral-8x7B-v0.1", 46.7e9, 12.9e9, "Mistral AI, 'Mixtral of experts' (2023): 46.7B total, 12.9B per token"},
		{"Qwen3-30B-A3B", 30.5e9, 3.3e9, "huggingface.co/Qwen/Qwen3-30B-A3B model card: 30.5B total, 3.3B activated"},
		{"DeepSeek-V3", 671e9, 37e9, "DeepSeek-V3 technical report (arXiv 2412.19437): 671B total, 37B activated (the 14B MTP module not counted)"},
		{"gpt-oss-20b", 20.91e9, 0, "OpenAI gpt-oss model card (2025): 20.91B total"},
		{"gpt-oss-120b", 116.83e9, 0, "OpenAI gpt-oss model card (2025): 116.83B total"},
	}
	seen := map[string]bool{"tiny": true} // steplab's own toy: counted exactly in TestShapeSizes
	for _, tc := range tests {
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			s, err := builtin.LookupModel(tc.name)
			require.NoError(t, err, tc.source)
			assert.InEpsilon(t, tc.total, float64(s.ParamCount()), 0.02, tc.source)
			if tc.active > 0 {
				assert.InEpsilon(t, tc.active, float64(s.ActiveParamCount()), 0.02, tc.source)
			}
		})
	}
	// gpt-oss states active parameters without the input embedding: 3.61B
	// (20b) and 5.13B (120b) by the same model card.
	for name, active := range map[string]float64{"gpt-oss-20b": 3.61e9, "gpt-oss-120b": 5.13e9} {
		s := mustShape(name)
		assert.InEpsilon(t, active, float64(s.ActiveParamCount())-float64(s.Vocab*s.Hidden), 0.02, name)
	}
	for _, s := range builtin.Models() {
		assert.True(t, seen[s.Name], "built-in model %s has no published parameter count in this test", s.Name)
	}
}

// TestCatalogModelResolution: names with and without org prefix, any
// case, aliases, fine-tune suffixes, TP suffixes, and paths.
func TestCatalogModelResolution(t *testing.T) {
	tests := []struct {
		in, want string
		tp       int
		note     string // a note the loose match adds
	}{
		{"Llama-3.1-8B", "Llama-3.1-8B", 1, ""},
		{"meta-llama/Llama-3.1-8B", "Llama-3.1-8B", 1, ""},
		{"META-LLAMA/LLAMA-3.1-8B", "Llama-3.1-8B", 1, ""},
		{"meta-llama/Meta-Llama-3.1-8B", "Llama-3.1-8B", 1, ""}, // aliases.txt
		{"meta-llama/Llama-3.1-8B-Instruct", "Llama-3.1-8B", 1, "fine-tune suffixes"},
		{"Qwen/Qwen3-30B-A3B-Instruct-2507", "Qwen3-30B-A3B", 1, "fine-tune suffixes"},
		{"mistralai/Mistral-Nemo-Instruct-2407", "Mistral-Nemo-Base-2407", 1, "fine-tune suffixes"},
		{"google/gemma-2-9b", "gemma-2-9b-it", 1, "fine-tune suffixes"},
		{"mistralai/Mixtral-8x7B-Instruct-v0.1", "Mixtral-8x7B-v0.1", 1, "fine-tune suffixes"},
		{"deepseek-ai/DeepSeek-V3-0324", "DeepSeek-V3", 1, "fine-tune suffixes"},
		{"openai/gpt-oss-120b", "gpt-oss-120b", 1, ""},
		{"Llama-3.1-70B-TP4", "Llama-3.1-70B-TP4", 4, ""},
		{"DeepSeek-V3-TP8", "DeepSeek-V3-TP8", 8, ""},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			s, err := builtin.LookupModel(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, s.Name)
			assert.Equal(t, tc.tp, s.TP)
			if tc.note != "" {
				assert.Contains(t, strings.Join(s.Notes, "\n"), tc.note)
			}
		})
	}
	_, err := builtin.LookupModel("meta-llama/Llama-4-Scout")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nearest known")
	assert.Contains(t, err.Error(), "config.json")
}

// TestCatalogModelPaths: a config.json path, its directory, or any *.json
// resolve as files, named after their directory (or file).
func TestCatalogModelPaths(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "My-Model-7B")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	b, err := fs.ReadFile(builtinFS, "data/models/Qwen2.5-7B/config.json")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "other.json"), b, 0o644))
	for ref, name := range map[string]string{dir: "My-Model-7B", filepath.Join(dir, "config.json"): "My-Model-7B", filepath.Join(dir, "other.json"): "other"} {
		s, err := builtin.LookupModel(ref)
		require.NoError(t, err, ref)
		assert.Equal(t, name, s.Name)
		assert.Equal(t, qwen7B.ParamCount(), s.ParamCount())
	}
	_, err = builtin.LookupModel(filepath.Join(dir, "nope.json"))
	assert.ErrorContains(t, err, "nope.json")
}

// userSpec is a GPU that is not in the catalogue, as a user writes it.
var userSpec = func() string {
	b, err := os.ReadFile(filepath.Join("testdata", "user-gpu.yaml"))
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// TestCatalogAddGPUAsDataFile: a GPU is one data file — resolved by path,
// or by name from a STEPLAB_CATALOG directory, and its KV cache is sized
// (TestRooflineUserGPU prices a step on it).
func TestCatalogAddGPUAsDataFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "hardware"), 0o755))
	spec := filepath.Join(dir, "hardware", "test-gpu.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(userSpec), 0o644))
	cfgDir := filepath.Join(dir, "models", "Toy-Model")
	require.NoError(t, os.MkdirAll(cfgDir, 0o755))
	cfg, err := fs.ReadFile(builtinFS, "data/models/Llama-3.1-8B/config.json")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(cfgDir, "config.json"), cfg, 0o644))

	t.Setenv(CatalogEnv, "")
	byPath, err := LookupHardware(spec)
	require.NoError(t, err)
	assert.Equal(t, "Test-GPU-48G", byPath.Name)
	_, err = LookupHardware("NVIDIA Test GPU 48G")
	require.Error(t, err, "not in the catalogue until its directory is listed")

	t.Setenv(CatalogEnv, strings.Join([]string{filepath.Join(dir, "absent-is-refused")}, string(os.PathListSeparator)))
	_, err = LookupHardware("H200")
	require.ErrorContains(t, err, "absent-is-refused")

	t.Setenv(CatalogEnv, string(os.PathListSeparator)+dir)
	byName, err := LookupHardware("NVIDIA Test GPU 48G")
	require.NoError(t, err)
	assert.Equal(t, spec, byName.File)
	assert.Equal(t, byPath.TFLOPS, byName.TFLOPS)
	shape, err := LookupModel("Toy-Model")
	require.NoError(t, err)
	assert.Equal(t, llama8B.ParamCount(), shape.ParamCount())

	n, err := KVBlocks(byName, shape, 16, 0.9, 0)
	require.NoError(t, err)
	assert.Positive(t, n)
}

// TestCatalogShadowing: a user file may shadow a built-in name, and a note
// says so; two files of one source claiming a name is an error.
func TestCatalogShadowing(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "hardware"), 0o755))
	mine := strings.Replace(strings.Replace(userSpec, "Test-GPU-48G", "H200-SXM", 1), "memory_bandwidth_gbs: 1000", "memory_bandwidth_gbs: 4000", 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hardware", "h200.yaml"), []byte(mine), 0o644))
	c, err := LoadCatalog(dir)
	require.NoError(t, err)
	hw, err := c.LookupHardware("NVIDIA H200") // a built-in alias follows the shadowing entry
	require.NoError(t, err)
	assert.Equal(t, 4000.0, hw.MemBandwidthGBs)
	assert.Contains(t, strings.Join(hw.Notes, "\n"), "shadows H200-SXM (builtin:hardware/h200-sxm.yaml)")
	assert.Len(t, c.Notes(), 1)
	assert.Len(t, c.Hardware(), len(builtin.Hardware()), "the shadowed entry is gone, not listed twice")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "hardware", "h200-again.yaml"), []byte(mine), 0o644))
	_, err = LoadCatalog(dir)
	assert.ErrorContains(t, err, "both claim the hardware name")
}

// TestHardwareSpecErrors: a bad spec file is an error naming the file and
// the field (or the line of an unknown key).
func TestHardwareSpecErrors(t *testing.T) {
	replace := func(old, new string) string {
		require.Contains(t, userSpec, old)
		return strings.Replace(userSpec, old, new, 1)
	}
	tests := []struct {
		name, spec string
		want       []string
	}{
		{"missing bandwidth", replace("memory_bandwidth_gbs: 1000\n", ""), []string{"memory_bandwidth_gbs: missing or zero"}},
		{"zero memory", replace("memory_gb: 48", "memory_gb: 0"), []string{"memory_gb: missing or zero"}},
		{"negative sms", replace("sms: 100", "sms: -3"), []string{"sms: -3: must be a positive number"}},
		{"negative bf16", replace("bf16: 200", "bf16: -200"), []string{"tflops.bf16"}},
		{"zero fp8", replace("fp8: 400", "fp8: 0"), []string{"tflops.fp8: empty or 0", "leave the key out"}},
		{"empty fp8", replace("fp8: 400", "fp8: "), []string{"line 6: tflops.fp8: empty or 0"}},
		{"unknown key", replace("sms: 100", "sms: 100\nhbm_stacks: 5"), []string{"line 8", `unknown key "hbm_stacks"`, "known: aliases"}},
		{"unknown nested key", replace("fp8: 400", "fp8: 400, fp6: 800"), []string{`unknown key "fp6" in tflops`}},
		{"zero fp4", replace("fp8: 400", "fp8: 400, fp4: 0"), []string{"tflops.fp4: empty or 0"}},
		{"unknown link key", replace("latency_us: 15", "latency_us: 15, lanes: 16"), []string{`in interconnects[0]`, `"lanes"`}},
		{"bad link kind", replace("kind: pcie", "kind: ethernet"), []string{`interconnects[0].kind: "ethernet"`}},
		{"no roofline", replace("roofline: generic\n", ""), []string{"roofline: missing"}},
		{"bad roofline word", replace("roofline: generic", "roofline: fast"), []string{`roofline: "fast"`}},
		{"roofline without basis", replace("roofline: generic", "roofline: {gemm_efficiency: 0.8}"), []string{"roofline.basis: missing"}},
		{"bad curve", replace("roofline: generic", `roofline: {basis: x, gemm_efficiency: [[1, 0.5], [1, 0.6]], attention_efficiency: 0.5,
  weight_bandwidth_efficiency: 0.8, kv_bandwidth_efficiency: 0.9, allreduce_efficiency: 0.7, fixed_ns: 1, per_layer_ns: 1}`),
			[]string{"roofline.gemm_efficiency: point 1", "strictly ascending"}},
		{"not a mapping", "- just\n- a list\n", []string{"want a YAML mapping"}},
		{"not yaml", "name: [unclosed\n", []string{"not valid YAML"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseHardwareSpec("gpus/test.yaml", []byte(tc.spec))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "hardware spec gpus/test.yaml: ")
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	hw, err := ParseHardwareSpec("gpus/test.yaml", []byte(userSpec))
	require.NoError(t, err)
	assert.Equal(t, "gpus/test.yaml", hw.File)
	assert.Equal(t, GenericRoofline(), hw.Roofline)
}

func TestCatalogNoDuplicateKeys(t *testing.T) {
	// Two built-in entries never share a normalised name or alias (loading
	// would fail), and every alias resolves to its own entry.
	for _, hw := range builtin.Hardware() {
		for _, a := range append([]string{hw.Name}, hw.Aliases...) {
			got, err := builtin.LookupHardware(a)
			require.NoError(t, err, a)
			assert.Equal(t, hw.Name, got.Name, a)
		}
	}
	assert.True(t, slices.IsSortedFunc(builtin.Hardware(), func(a, b Hardware) int {
		return strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name))
	}))
}
