package sim

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/model"
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
	models := []string{"Llama-3.1-8B", "Qwen2.5-7B", "Llama-3.1-70B-TP4", "tiny"}
	for i := 0; i < 40; i++ {
		sc := DefaultScenario()
		sc.Hardware = []string{"H100", "H200"}[r.IntN(2)]
		sc.Model = models[r.IntN(len(models))]
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
		sc.Engine.CUDAGraphSizes = DefaultCUDAGraphSizes(8 << r.IntN(6))
		if !sc.Engine.ChunkedPrefill {
			sc.Engine.MaxNumBatchedTokens = max(sc.Engine.MaxNumBatchedTokens, sc.Engine.MaxModelLen)
		}
		name := fmt.Sprintf("%d:%s/%s", i, sc.Hardware, sc.Model)
		p, err := sc.EnginePlan()
		require.NoError(t, err, name)
		m := p.Manifest(nil, "")
		back, warn, err := PlanFromManifest(&m, ManifestOptions{FPM: p.FPMName, Host: p.HostName})
		require.NoError(t, err, name)
		assert.Empty(t, warn, name)
		assert.Equal(t, p.Sched, back.Sched, name)
		assert.Equal(t, p.Async, back.Async, name)
		assert.Equal(t, p.Graphs, back.Graphs, name)
		assert.Equal(t, p.HW, back.HW, name)
		assert.Equal(t, p.Shape, back.Shape, name)
		assert.Equal(t, p.Host, back.Host, name)
		assert.Equal(t, p.FPM, back.FPM, name)
	}
}

// What a manifest leaves out is said; a recorded num_gpu_blocks wins over
// the estimate; a GPU the catalogue lacks is refused only where it is
// needed.
func TestPlanFromManifestPartial(t *testing.T) {
	full := func() *datasets.Manifest {
		p, err := DefaultScenario().EnginePlan()
		require.NoError(t, err)
		m := p.Manifest(nil, "")
		return &m
	}
	m := full()
	m.Engine.NumGPUBlocks = 777
	p, _, err := PlanFromManifest(m, ManifestOptions{})
	require.NoError(t, err)
	assert.Equal(t, 777, p.Sched.NumGPUBlocks, "recorded capacity wins")

	m = full()
	m.Engine.NumGPUBlocks = 0
	p, warn, err := PlanFromManifest(m, ManifestOptions{})
	require.NoError(t, err)
	est, err := model.KVBlocks(p.HW, p.Shape, p.Sched.BlockSize, 0.9)
	require.NoError(t, err)
	assert.Equal(t, est, p.Sched.NumGPUBlocks)
	assert.Contains(t, warn[0], "num_gpu_blocks not recorded")

	m = full()
	m.Hardware.GPUName = "Imaginary GPU 9000"
	_, _, err = PlanFromManifest(m, ManifestOptions{})
	assert.ErrorContains(t, err, "Imaginary GPU 9000", "the roofline needs the hardware")
	art := filepath.Join(t.TempDir(), "lin.json")
	l, err := model.NewLinear([]string{model.TermConst}, []float64{1e6})
	require.NoError(t, err)
	require.NoError(t, model.LinearArtifact(l).Save(art))
	p, _, err = PlanFromManifest(m, ManifestOptions{FPM: art})
	require.NoError(t, err, "a fitted model and a recorded capacity need no hardware")
	assert.Equal(t, m.Engine.NumGPUBlocks, p.Sched.NumGPUBlocks)
	m.Engine.NumGPUBlocks = 0
	_, warn, err = PlanFromManifest(m, ManifestOptions{FPM: art})
	require.NoError(t, err)
	assert.Contains(t, warn[0], "no KV pressure")

	m = full()
	m.Engine = nil
	m.CUDAGraphSizes = nil
	_, warn, err = PlanFromManifest(m, ManifestOptions{})
	require.NoError(t, err)
	assert.Len(t, warn, 3, "no engine, no graphs, capacity estimated: %v", warn)
}
