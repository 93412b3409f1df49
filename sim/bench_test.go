package sim

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkSimulateAzureConv is DESIGN.md §7's simulation target: the whole
// Azure conversation trace (19,366 requests) on the default engine, dataset
// written. Run with -cpu 1 -benchmem.
func BenchmarkSimulateAzureConv(b *testing.B) {
	dir, _, cleanup, err := traceDataset(DefaultTrace)
	require.NoError(b, err)
	defer cleanup()
	for _, stepReqs := range []bool{true, false} {
		name := "steps+requests"
		if stepReqs {
			name = "all-tables"
		}
		b.Run(name, func(b *testing.B) {
			sc := DefaultScenario()
			sc.Workload.Trace = dir
			sc.Output.StepRequests = stepReqs
			p, err := sc.Plan()
			require.NoError(b, err)
			out := filepath.Join(b.TempDir(), "ds")
			var steps int64
			for b.Loop() {
				res, err := Run(p, out, RunOptions{Overwrite: true})
				require.NoError(b, err)
				steps = res.Engine.Steps
			}
			b.ReportMetric(float64(steps), "steps/op")
		})
	}
}
