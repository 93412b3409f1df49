package sim_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steplab/steplab/internal/rewrite"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAIConfiguratorModelsSimulate simulates every config.json of
// AIConfigurator's model_configs (catalog/testdata/aiconfigurator) on B200
// with the roofline prior, at the first tensor-parallel size in 1, 2, 4,
// 8 that plans (weights and KV cache fit), then 16: two 8-GPU nodes, as
// the models holding more weights than eight B200s are served, their
// all-reduces priced across the nodes' network. Every config runs; the
// table of sizes is a golden file that docs/catalog.md shows.
func TestAIConfiguratorModelsSimulate(t *testing.T) {
	files, err := filepath.Glob("../catalog/testdata/aiconfigurator/*_config.json")
	require.NoError(t, err)
	var table strings.Builder
	table.WriteString("| config | architecture | TP | on | ITL p50 (ms) |\n|---|---|---:|---|---:|\n")
	ran, n, twoNodes := 0, 0, 0
	for _, f := range files {
		if strings.HasSuffix(f, "_hf_quant_config.json") {
			continue
		}
		n++
		name := strings.TrimSuffix(filepath.Base(f), "_config.json")
		sc := scenario.Default()
		sc.Hardware, sc.Model = "B200", f
		sc.Workload = scenario.WorkloadSpec{Kind: "poisson", RateRPS: 20, Requests: 16,
			Prompt: scenario.LengthSpec{Kind: "fixed", Value: 512}, Output: scenario.LengthSpec{Kind: "fixed", Value: 16}}
		var planErr error
		for _, tp := range []int{1, 2, 4, 8, 16} {
			sc.TensorParallel = tp
			p, err := sc.Plan()
			if planErr = err; err != nil {
				continue
			}
			res, err := scenario.Run(p, filepath.Join(t.TempDir(), "ds"), sim.RunOptions{Command: []string{"steplab", "simulate"}})
			if !assert.NoError(t, err, name) {
				break
			}
			ran++
			layout, err := p.Engine().HW.Layout(tp)
			require.NoError(t, err, name)
			on := "one node"
			if layout.MultiNode() {
				twoNodes++
				m := p.Manifest(nil, "")
				require.NotNil(t, m.Hardware.Nodes, name)
				assert.Equal(t, 2, m.Hardware.Nodes.Nodes, name)
				assert.Equal(t, 8, m.Hardware.Nodes.GPUsPerNode, name)
				on = fmt.Sprintf("%d nodes × %d", layout.Nodes, layout.GPUsPerNode)
			}
			t.Logf("%-50s TP%-2d on %s: finished %d, ITL p50 %.2f ms", name, tp, layout, res.Finished, res.ITL.P50)
			fmt.Fprintf(&table, "| %s | %s | %d | %s | %.2f |\n", name, p.Shape.Architecture, tp, on, res.ITL.P50)
			break
		}
		if planErr != nil {
			t.Errorf("%s does not run at TP 16: %v", name, planErr)
		}
	}
	assert.Equal(t, 86, n)
	assert.Equal(t, 86, ran, "of %d", n)
	assert.Equal(t, 5, twoNodes, "the configs that need two nodes")
	rewrite.DocTable(t, filepath.Join("testdata", "aiconfigurator-b200.md"), filepath.Join("..", "docs", "catalog.md"),
		"aiconfigurator-b200", "go test ./sim -run AIConfiguratorModelsSimulate -rewrite", table.String())
}

// TestHybridManifestInverse: a hybrid model's manifest (its stack, state
// mixer, indexer and per-part precision) plans back to the same shape.
func TestHybridManifestInverse(t *testing.T) {
	for _, name := range []string{"nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", "nvidia--Qwen3.6-35B-A3B-NVFP4",
		"nvidia--GLM-5-NVFP4", "nvidia--MiniMax-M2.7-NVFP4", "google--gemma-4-26B-A4B"} {
		sc := scenario.Default()
		sc.Hardware, sc.Model, sc.TensorParallel = "B200", "../catalog/testdata/aiconfigurator/"+name+"_config.json", 4
		p, err := sc.EnginePlan()
		require.NoError(t, err, name)
		m := p.Manifest(nil, "")
		back, warn, err := scenario.PlanFromManifest(&m, scenario.ManifestOptions{FPM: p.Engine().FPMName})
		require.NoError(t, err, name)
		assert.Empty(t, warn, name)
		assert.Equal(t, p.Shape, back.Shape, name)
		assert.Equal(t, p.Engine().Sched, back.Engine().Sched, name)
	}
}
