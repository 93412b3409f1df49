package sim

import (
	"github.com/steplab/steplab/datasets"
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

type discard struct{}

func (discard) Step(*datasets.Step, []datasets.StepRequest) error { return nil }
func (discard) Request(*datasets.Request) error                   { return nil }

// BenchmarkEngineAzureConv isolates the engine (scheduler, executor,
// recording) from the dataset writer: the same trace into a discarding sink.
func BenchmarkEngineAzureConv(b *testing.B) {
	dir, _, cleanup, err := traceDataset(DefaultTrace)
	require.NoError(b, err)
	defer cleanup()
	sc := DefaultScenario()
	sc.Workload.Trace = dir
	p, err := sc.Plan()
	require.NoError(b, err)
	var steps int64
	for b.Loop() {
		src, _, done, err := p.Source()
		require.NoError(b, err)
		eng, err := NewEngine(EngineConfig{Sched: p.Sched, Async: p.Async}, NewSimExecutor(p.FPM, p.Payload, p.Host, p.Graphs),
			&VirtualClock{}, HostAdapter{p.Host}, discard{})
		require.NoError(b, err)
		_, err = Drive(eng, src)
		require.NoError(b, err)
		done()
		steps = eng.Stats().Steps
	}
	b.ReportMetric(float64(steps), "steps/op")
}
