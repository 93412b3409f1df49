package sim_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
)

var manifestSeed = flag.Uint64("sim.manifest-seed", 0, "seed of TestPlanFromManifestInverse (0: from the clock)")

// PlanFromManifest is the inverse of Plan.Manifest for the engine: over
// random scenarios, the plan rebuilt from the manifest has the same
// hardware, shape, models, limits, KV capacity, graphs and async mode, and
// needs no default.
func TestPlanFromManifestInverse(t *testing.T) {
	seed := *manifestSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -sim.manifest-seed=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 0))
	hosts := []string{"", filepath.Join("..", "datasets", "h200", "models", "host.json")}
	cat, err := catalog.DefaultCatalog()
	require.NoError(t, err)
	hws, models := cat.Hardware(), cat.Models()
	for i, planned := 0, 0; planned < 60 && i < 1000; i++ {
		sc := scenario.Default()
		sc.Hardware = hws[r.IntN(len(hws))].Name
		sc.Model = models[r.IntN(len(models))].Name
		sc.KVCacheDType = []string{"", "fp8"}[r.IntN(2)]
		sc.Host = hosts[r.IntN(len(hosts))]
		sc.Engine.MaxNumSeqs = 1 << (4 + r.IntN(6))
		sc.Engine.MaxNumBatchedTokens = 1 << (11 + r.IntN(4))
		sc.Engine.BlockSize = 1 << (3 + r.IntN(3))
		sc.Engine.GPUMemoryUtilization = 0.5 + 0.45*r.Float64()
		if r.IntN(3) == 0 {
			sc.Engine.NumGPUBlocks = 2000 + r.IntN(50000)
		}
		sc.Engine.MaxModelLen = 4096
		sc.Engine.ChunkedPrefill = r.IntN(4) > 0
		sc.Engine.PrefixCaching = r.IntN(2) == 0
		sc.Engine.AsyncScheduling = r.IntN(2) == 0
		sc.Engine.LongPrefillTokenThreshold = r.IntN(2) * 512
		sc.Engine.CUDAGraphSizes = scenario.DefaultCUDAGraphSizes(8 << r.IntN(6))
		if !sc.Engine.ChunkedPrefill {
			sc.Engine.MaxNumBatchedTokens = max(sc.Engine.MaxNumBatchedTokens, sc.Engine.MaxModelLen)
		}
		name := fmt.Sprintf("%d:%s/%s", i, sc.Hardware, sc.Model)
		p, err := sc.EnginePlan()
		if err != nil && (strings.Contains(err.Error(), "does not fit") || strings.Contains(err.Error(), "exceeds the KV capacity") ||
			strings.Contains(err.Error(), "leaves no memory for the KV cache")) {
			continue // a model too large for this GPU, its KV cache too small for max_model_len, or no room left for one: refused, rightly
		}
		require.NoError(t, err, name)
		planned++
		m := p.Manifest(nil, "")
		back, warn, err := scenario.PlanFromManifest(&m, scenario.ManifestOptions{FPM: p.Engine().FPMName, Host: p.Engine().HostName})
		require.NoError(t, err, name)
		assert.Empty(t, warn, name)
		assert.Equal(t, p.Engine().Sched, back.Engine().Sched, name)
		assert.Equal(t, p.Engine().Async, back.Engine().Async, name)
		assert.Equal(t, p.Engine().Graphs, back.Engine().Graphs, name)
		assert.Equal(t, p.Engine().HW, back.Engine().HW, name)
		assert.Equal(t, p.Shape, back.Shape, name)
		assert.Equal(t, p.Engine().Host, back.Engine().Host, name)
		assert.Equal(t, p.Engine().FPM, back.Engine().FPM, name)
	}
}

// What a manifest leaves out is said; a recorded num_gpu_blocks wins over
// the estimate; a GPU the catalogue lacks is refused only where it is
// needed.
func TestPlanFromManifestPartial(t *testing.T) {
	full := func() *datasets.Manifest {
		p, err := scenario.Default().EnginePlan()
		require.NoError(t, err)
		m := p.Manifest(nil, "")
		return &m
	}
	m := full()
	m.Engine.NumGPUBlocks = 777
	p, _, err := scenario.PlanFromManifest(m, scenario.ManifestOptions{})
	require.NoError(t, err)
	assert.Equal(t, 777, p.Engine().Sched.NumGPUBlocks, "recorded capacity wins")

	m = full()
	m.Engine.NumGPUBlocks = 0
	p, warn, err := scenario.PlanFromManifest(m, scenario.ManifestOptions{})
	require.NoError(t, err)
	est, err := catalog.KVBlocks(p.Engine().HW, p.Shape, p.Engine().Sched.BlockSize, 0.9, 0)
	require.NoError(t, err)
	assert.Equal(t, est, p.Engine().Sched.NumGPUBlocks)
	assert.Contains(t, warn[0], "num_gpu_blocks not recorded")

	m = full()
	m.Hardware.GPUName = "Imaginary GPU 9000"
	_, _, err = scenario.PlanFromManifest(m, scenario.ManifestOptions{})
	assert.ErrorContains(t, err, "Imaginary GPU 9000", "the roofline needs the hardware")
	art := filepath.Join(t.TempDir(), "lin.json")
	l, err := fpm.NewLinear([]string{fpm.TermConst}, []float64{1e6})
	require.NoError(t, err)
	require.NoError(t, fpm.LinearArtifact(l).Save(art))
	p, _, err = scenario.PlanFromManifest(m, scenario.ManifestOptions{FPM: art})
	require.NoError(t, err, "a fitted model and a recorded capacity need no hardware")
	assert.Equal(t, m.Engine.NumGPUBlocks, p.Engine().Sched.NumGPUBlocks)
	m.Engine.NumGPUBlocks = 0
	_, warn, err = scenario.PlanFromManifest(m, scenario.ManifestOptions{FPM: art})
	require.NoError(t, err)
	assert.Contains(t, warn[0], "no KV pressure")

	m = full()
	m.Engine = nil
	m.CUDAGraphSizes = nil
	_, warn, err = scenario.PlanFromManifest(m, scenario.ManifestOptions{})
	require.NoError(t, err)
	assert.Len(t, warn, 3, "no engine, no graphs, capacity estimated: %v", warn)
}

// A GPU from a spec file and a model from a config.json, neither in the
// catalogue, simulate; their dataset's manifest plans the same engine
// again.
func TestSimulateFromSpecFileAndConfig(t *testing.T) {
	dir := t.TempDir()
	gpu := filepath.Join(dir, "my-gpu.yaml")
	require.NoError(t, os.WriteFile(gpu, []byte(`name: Imaginary-GPU-48G
memory_gb: 48
memory_bandwidth_gbs: 1200
tflops: {fp32: 40, bf16: 300, fp16: 300}
sms: 100
boost_clock_mhz: 2000
interconnects: [{kind: pcie, gbs_per_direction: 32, latency_us: 15, gpus: 8}]
roofline: generic
`), 0o644))
	cfg := filepath.Join(dir, "my-model", "config.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(cfg), 0o755))
	require.NoError(t, os.WriteFile(cfg, []byte(`{"architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22, "num_attention_heads": 32,
  "num_key_value_heads": 4, "vocab_size": 32000, "torch_dtype": "bfloat16", "tie_word_embeddings": false}`), 0o644))

	sc := scenario.Default()
	sc.Hardware, sc.Model = gpu, cfg
	sc.Workload.Limit = 200
	p, err := sc.Plan()
	require.NoError(t, err)
	assert.Equal(t, "Imaginary-GPU-48G", p.Engine().HW.Name)
	assert.Equal(t, 22, p.Shape.Layers)
	out := filepath.Join(dir, "ds")
	res, err := scenario.Run(p, out, sim.RunOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, res.Report.Steps)

	d, err := datasets.Open(out)
	require.NoError(t, err)
	assert.Equal(t, gpu, d.Manifest.Hardware.Spec)
	back, warn, err := scenario.PlanFromManifest(d.Manifest, scenario.ManifestOptions{})
	require.NoError(t, err)
	assert.Empty(t, warn)
	assert.Equal(t, p.Engine().HW, back.Engine().HW)
	assert.Equal(t, p.Shape, back.Shape)
	assert.Equal(t, p.Engine().Sched, back.Engine().Sched)
}

// The bundled real vLLM runs name their GPU and model as their tools wrote
// them; the catalogue resolves both, the MoE as a MoE.
func TestPlanFromManifestForeignNames(t *testing.T) {
	m := &datasets.Manifest{Hardware: &datasets.Hardware{GPUName: "RTXPRO6000"},
		Model:  &datasets.ModelShape{Name: "Qwen/Qwen3-30B-A3B-Instruct-2507"},
		Engine: &datasets.EngineConfig{MaxNumSeqs: 128, MaxNumBatchedTokens: 2048, BlockSize: 16, NumGPUBlocks: 20000, MaxModelLen: 4096, ChunkedPrefill: true}}
	p, _, err := scenario.PlanFromManifest(m, scenario.ManifestOptions{})
	require.NoError(t, err)
	assert.Contains(t, p.Engine().HW.Name, "RTX-PRO-6000")
	assert.Equal(t, 128, p.Shape.MoE.Experts, "the MoE shape, not a dense proxy")
	assert.Equal(t, 20000, p.Engine().Sched.NumGPUBlocks)

	m.Hardware.GPUName = "MI250X"
	_, _, err = scenario.PlanFromManifest(m, scenario.ManifestOptions{})
	assert.ErrorContains(t, err, "MI250X")
	assert.ErrorContains(t, err, "nearest known")
}
