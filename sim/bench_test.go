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

// recorder keeps every row an engine records (for BenchmarkDatasetSink).
type recorder struct {
	steps    []datasets.Step
	stepReqs []datasets.StepRequest
	perStep  []int32 // step_requests rows of each step
	reqs     []datasets.Request
}

func (r *recorder) Step(st *datasets.Step, rs []datasets.StepRequest) error {
	r.steps = append(r.steps, *st)
	r.stepReqs = append(r.stepReqs, rs...)
	r.perStep = append(r.perStep, int32(len(rs)))
	return nil
}

func (r *recorder) Request(q *datasets.Request) error {
	r.reqs = append(r.reqs, *q)
	return nil
}

// replayRows writes rec's rows through s (require.NoError per row would
// cost more than the writing: it walks the stack).
func replayRows(s *DatasetSink, rec *recorder) error {
	off := 0
	for i := range rec.steps {
		n := int(rec.perStep[i])
		if err := s.Step(&rec.steps[i], rec.stepReqs[off:off+n]); err != nil {
			return err
		}
		off += n
	}
	for i := range rec.reqs {
		if err := s.Request(&rec.reqs[i]); err != nil {
			return err
		}
	}
	return s.Close()
}

// BenchmarkDatasetSink isolates the dataset writer: the rows the engine
// records for the Azure conversation trace, written through a DatasetSink.
// BenchmarkSimulateAzureConv's time is about this plus BenchmarkEngineAzureConv.
func BenchmarkDatasetSink(b *testing.B) {
	dir, _, cleanup, err := traceDataset(DefaultTrace)
	require.NoError(b, err)
	defer cleanup()
	sc := DefaultScenario()
	sc.Workload.Trace = dir
	p, err := sc.Plan()
	require.NoError(b, err)
	src, _, done, err := p.Source()
	require.NoError(b, err)
	var rec recorder
	eng, err := NewEngine(EngineConfig{Sched: p.Sched, Async: p.Async}, NewSimExecutor(p.FPM, p.Payload, p.Host, p.Graphs),
		&VirtualClock{}, HostAdapter{p.Host}, &rec)
	require.NoError(b, err)
	_, err = Drive(eng, src)
	require.NoError(b, err)
	done()
	for _, stepReqs := range []bool{true, false} {
		name := "steps+requests"
		if stepReqs {
			name = "all-tables"
		}
		b.Run(name, func(b *testing.B) {
			out := filepath.Join(b.TempDir(), "ds")
			rows := len(rec.steps) + len(rec.reqs)
			if stepReqs {
				rows += len(rec.stepReqs)
			}
			for b.Loop() {
				w, err := datasets.Create(out, datasets.Manifest{}, datasets.CreateOptions{Overwrite: true})
				require.NoError(b, err)
				s, err := NewDatasetSink(w, stepReqs)
				require.NoError(b, err)
				if err := replayRows(s, &rec); err != nil {
					b.Fatal(err)
				}
				require.NoError(b, w.Close())
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
