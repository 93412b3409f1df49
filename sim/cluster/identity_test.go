package cluster_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
)

// goldenScenario is sim's determinism scenario (TestDeterministicDataset):
// 400 Poisson requests on the default engine with a tight KV cache.
func goldenScenario() scenario.Scenario {
	sc := scenario.Default()
	sc.Seed = 7
	sc.Workload = scenario.WorkloadSpec{Kind: "poisson", RateRPS: 40, Requests: 400,
		Prompt: scenario.LengthSpec{Kind: "lognormal", Mean: 900, Sigma: 0.8, Max: 8000},
		Output: scenario.LengthSpec{Kind: "lognormal", Mean: 150, Sigma: 0.7, Max: 2000}}
	sc.Engine.NumGPUBlocks = 3000
	return sc
}

// One replica behind the router writes simulate's dataset byte for byte:
// the SHA-256 pinned in sim/testdata/golden_sha256.txt.
func TestOneReplicaIsSimulate(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "testdata", "golden_sha256.txt"))
	require.NoError(t, err)
	for _, name := range []string{"no cluster block", "one explicit replica"} {
		sc := goldenScenario()
		if name != "no cluster block" {
			require.NoError(t, sc.Set("cluster.pools={sim: {replicas: 1}}"))
			require.NoError(t, sc.Set("cluster.router.name=kv"))
		}
		p, err := sc.Plan()
		require.NoError(t, err, name)
		dir := filepath.Join(t.TempDir(), "ds")
		_, err = scenario.Run(p, dir, sim.RunOptions{Command: []string{"steplab", "simulate"}})
		require.NoError(t, err, name)
		sha, err := datasets.DirSHA256(dir)
		require.NoError(t, err)
		require.Equal(t, strings.TrimSpace(string(want)), sha, name)
	}
}

// The scenario block of docs/scenarios.md parses as written (simulate
// reads it with its cluster block) and states the real defaults (but for
// the graph sizes it abbreviates and the benchmark grid's own defaults,
// which only apply to kind benchmark): one engine, simulate's.
func TestDocumentedScenarioIsTheDefault(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "scenarios.md"))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), "```yaml\n")
	require.True(t, ok, "docs/scenarios.md has a yaml block")
	block, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	p := filepath.Join(t.TempDir(), "documented.yaml")
	require.NoError(t, os.WriteFile(p, []byte(block), 0o644))
	sc, err := scenario.Load(p)
	require.NoError(t, err)
	def := scenario.Default()
	assert.Equal(t, []int{1, 2, 4, 8, 16, 24, 32, 64, 128, 256, 512}, sc.Engine.CUDAGraphSizes)
	sc.Engine.CUDAGraphSizes = def.Engine.CUDAGraphSizes
	sc.Workload.Benchmark = def.Workload.Benchmark
	// The cluster block is the one-engine placement Plan checks below.
	sc.Cluster, sc.SLO = def.Cluster, def.SLO
	assert.Equal(t, def, sc)
	plan, err := sc.Plan()
	require.NoError(t, err)
	assert.True(t, plan.Single(), "the documented placement is one engine")
	one, err := def.Plan()
	require.NoError(t, err)
	assert.Equal(t, one.Manifest(nil, ""), plan.Manifest(nil, ""))
}
