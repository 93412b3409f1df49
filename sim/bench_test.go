package sim_test

import (
	"path/filepath"
	"testing"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/embedded"
	"github.com/steplab/steplab/datasets/importers"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/cluster"
	"github.com/stretchr/testify/require"
)

// tableSets are the two outputs the simulation benchmarks measure: every
// table (the default), and without step_requests.
var tableSets = []struct {
	name     string
	stepReqs bool
}{{"all-tables", true}, {"steps+requests", false}}

// azurePlan plans the default scenario on the embedded Azure conversation
// trace, imported once for the benchmark.
func azurePlan(b *testing.B, stepReqs bool) *scenario.Plan {
	e, err := embedded.Lookup(scenario.DefaultTrace)
	require.NoError(b, err)
	dir := filepath.Join(b.TempDir(), e.Name)
	_, err = importers.Import(e.Format, scenario.DefaultTrace, dir, importers.Options{})
	require.NoError(b, err)
	sc := scenario.Default()
	sc.Workload.Trace = dir
	sc.Output.StepRequests = stepReqs
	p, err := sc.Plan()
	require.NoError(b, err)
	return p
}

// driveInto runs p's workload on its simulated engine, a cluster of one,
// recording into sink.
func driveInto(b *testing.B, p *scenario.Plan, sink cluster.Sink) *cluster.Cluster {
	src, _, done, err := p.Source()
	require.NoError(b, err)
	defer done()
	c, err := p.New(sink, nil)
	require.NoError(b, err)
	_, err = cluster.Drive(c, src)
	require.NoError(b, err)
	return c
}

// BenchmarkSimulateAzureConv is the simulation target of docs/architecture.md#performance-targets: the whole
// Azure conversation trace (19,366 requests) on the default engine, dataset
// written. Run with -cpu 1 -benchmem.
func BenchmarkSimulateAzureConv(b *testing.B) {
	for _, ts := range tableSets {
		b.Run(ts.name, func(b *testing.B) {
			p := azurePlan(b, ts.stepReqs)
			out := filepath.Join(b.TempDir(), "ds")
			var steps int64
			for b.Loop() {
				res, err := scenario.Run(p, out, sim.RunOptions{Overwrite: true})
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
func (discard) Route(*cluster.Route) error                        { return nil }
func (discard) Transfer(*cluster.Transfer) error                  { return nil }

// BenchmarkEngineAzureConv isolates the engine (scheduler, executor,
// recording) and the drive loop from the dataset writer: the same trace
// into a discarding sink.
func BenchmarkEngineAzureConv(b *testing.B) {
	p := azurePlan(b, true)
	var steps int64
	for b.Loop() {
		steps = driveInto(b, p, discard{}).Stats().Steps
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

func (r *recorder) Route(*cluster.Route) error       { return nil }
func (r *recorder) Transfer(*cluster.Transfer) error { return nil }

// replayRows writes rec's rows through s (require.NoError per row would
// cost more than the writing: it walks the stack).
func replayRows(s *sim.DatasetSink, rec *recorder) error {
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
	var rec recorder
	driveInto(b, azurePlan(b, true), &rec)
	for _, ts := range tableSets {
		b.Run(ts.name, func(b *testing.B) {
			out := filepath.Join(b.TempDir(), "ds")
			rows := len(rec.steps) + len(rec.reqs)
			if ts.stepReqs {
				rows += len(rec.stepReqs)
			}
			for b.Loop() {
				w, err := datasets.Create(out, datasets.Manifest{}, datasets.CreateOptions{Overwrite: true})
				require.NoError(b, err)
				s, err := sim.NewDatasetSink(w, ts.stepReqs)
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
