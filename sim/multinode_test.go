package sim_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
)

// The default scenario at tensor_parallel 16 on B200 spans two HGX boards
// (8 GPUs each): its all-reduces cross the boards' 400 Gb/s network, so
// every step and the run are slower than the one 16-GPU NVLink domain the
// price assumed before nodes were modelled (the B200 spec with its NVLink
// domain widened to 16 GPUs). A TP of 8 is the same on both.
func TestTP16AcrossNodesSlowerThanOneDomain(t *testing.T) {
	b, err := os.ReadFile("../catalog/data/hardware/b200.yaml")
	require.NoError(t, err)
	wide := strings.Replace(string(b), "latency_us: 5, gpus: 8}", "latency_us: 5, gpus: 16}", 1)
	require.NotEqual(t, string(b), wide, "the NVLink line of b200.yaml")
	oneDomain := filepath.Join(t.TempDir(), "b200-one-domain.yaml")
	require.NoError(t, os.WriteFile(oneDomain, []byte(wide), 0o644))

	run := func(hw string, tp int) (*scenario.Plan, *sim.Result) {
		sc := scenario.Default()
		sc.Hardware, sc.TensorParallel = hw, tp
		sc.Workload.Limit = 300
		p, err := sc.Plan()
		require.NoError(t, err)
		res, err := scenario.Run(p, filepath.Join(t.TempDir(), "ds"), sim.RunOptions{Command: []string{"test"}})
		require.NoError(t, err)
		return p, res
	}
	nodes, across := run("B200", 16)
	domain, within := run(oneDomain, 16)
	m := nodes.Manifest(nil, "")
	require.NotNil(t, m.Hardware.Nodes)
	assert.Equal(t, 2, m.Hardware.Nodes.Nodes)
	assert.Equal(t, "network", m.Hardware.Nodes.Network.Kind)
	assert.Nil(t, domain.Manifest(nil, "").Hardware.Nodes, "one NVLink domain of 16")
	joined := strings.Join(m.Notes, "\n")
	assert.Contains(t, joined, "spans 2 nodes × 8 GPUs")
	assert.Contains(t, joined, "is a catalogue figure, not measured")

	f := fpm.Features{DecodeRequests: 64, PaddedBatch: 64, DecodeKVTokens: 64 * 1024}
	step, one := nodes.Engine().FPM.PredictNs(f), domain.Engine().FPM.PredictNs(f)
	t.Logf("Llama-3.1-8B TP16 on B200, decode B=64 at 1K: %.3f ms over two nodes, %.3f ms in one NVLink domain; ITL p50 %.3f against %.3f ms, run %.2f against %.2f s",
		step/1e6, one/1e6, across.ITL.P50, within.ITL.P50, across.DurationS, within.DurationS)
	assert.Greater(t, step, one, "the network leg makes each step slower")
	assert.Greater(t, across.ITL.P50, within.ITL.P50)

	eight, _ := run("B200", 8)
	wideEight, _ := run(oneDomain, 8)
	assert.Equal(t, eight.Engine().FPM.PredictNs(f), wideEight.Engine().FPM.PredictNs(f), "within one node nothing changes")
}
