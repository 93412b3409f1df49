package replay

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/pricing"
)

// TestH200OpsWallTime composes the measured-operations prior's device time
// with the host model fitted from the H200 captures into the
// inter-update period, as the simulator does, and compares both with the
// traffic captures (docs/ops-prior.md quotes the log; run with -v).
func TestH200OpsWallTime(t *testing.T) {
	const dir = "../datasets/h200"
	host, err := pricing.LoadHostModel(filepath.Join(dir, "models", "host.json"))
	require.NoError(t, err)
	worker, _, err := pricing.Load(filepath.Join(dir, "models", "ops-worker.json"))
	require.NoError(t, err)
	for _, name := range []string{"traffic-azure-5rps", "traffic-azure-12rps"} {
		d, err := datasets.Open(filepath.Join(dir, name))
		require.NoError(t, err)
		prior, err := pricing.FromManifest(d.Manifest, "ops", "")
		require.NoError(t, err)
		for _, m := range []struct {
			label   string
			fpModel fpm.FPM
		}{{"no fit", prior.FPM}, {"worker engine", worker}} {
			s, err := ReplaySteps(d, StepOptions{FPM: m.fpModel, Host: host})
			require.NoError(t, err)
			for _, g := range append([]GroupStats{s.Overall}, s.ByKind...) {
				gpu, wall := g.Fields[FieldGPU], g.Fields[FieldWall]
				t.Logf("%-20s %-13s %-8s n=%5d  gpu_time MAPE %5.1f%% p90 %5.1f%%  wall_time MAPE %5.1f%% p90 %5.1f%%",
					name, m.label, g.Group, g.Steps, 100*gpu.MAPE, 100*gpu.AbsRelP90, 100*wall.MAPE, 100*wall.AbsRelP90)
			}
			if m.label == "worker engine" {
				require.LessOrEqual(t, s.Overall.Fields[FieldWall].MAPE, 0.20, "%s: wall-time MAPE of the worker's prior plus the host model", name)
			}
		}
	}
}
