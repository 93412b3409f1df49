package replay

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/validate"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/scenario"
)

// Request replay of a simulated run with its own model and the manifest's
// engine reproduces every request's latencies.
func TestReplayRequestsReproducesSimulation(t *testing.T) {
	for _, name := range []string{"async", "preempting"} {
		t.Run(name, func(t *testing.T) {
			dir, p := simulated(t, name)
			d, err := datasets.Open(dir)
			require.NoError(t, err)
			out := filepath.Join(t.TempDir(), "out")
			// The engine comes back from the manifest alone: Plan.Manifest and
			// PlanFromManifest are inverses.
			back, warn, err := scenario.PlanFromManifest(d.Manifest, scenario.ManifestOptions{})
			require.NoError(t, err)
			assert.Empty(t, warn)
			assert.Equal(t, p.Engine().Sched, back.Engine().Sched)
			sum, err := RunRequests(d, RequestOptions{Plan: back.Plan}, Output{Dir: out, DatasetDir: dir, ModelName: "roofline"})
			require.NoError(t, err)
			assert.Equal(t, sum.Requests, sum.Compared)
			for _, dc := range []DistCompare{sum.TTFT, sum.ITL, sum.E2E} {
				assert.Equal(t, dc.Recorded, dc.Predicted)
				assert.Zero(t, dc.MAPE)
			}
			require.NotNil(t, sum.RecordedSteps)
			assert.Equal(t, sum.RecordedSteps.StepsByKind, sum.SimulatedSteps.StepsByKind)
			assert.Equal(t, sum.RecordedSteps.MeanBatchSize, sum.SimulatedSteps.MeanBatchSize)
			_, err = os.Stat(filepath.Join(out, "summary.json"))
			assert.NoError(t, err)
			o, err := datasets.Open(out)
			require.NoError(t, err)
			rows, err := datasets.ReadAll[RequestRow](o, TableRequestComparison)
			require.NoError(t, err)
			rep, err := validate.Dataset(out, validate.Options{})
			require.NoError(t, err)
			assert.True(t, rep.OK(), "a replay output validates: %v", rep.Violations)
			assert.Len(t, rows, sum.Requests)
		})
	}
}

// A slower model shows up as positive ITL and E2E errors.
func TestReplayRequestsSlowerModel(t *testing.T) {
	dir, p := simulated(t, "async")
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	tr, err := LoadTrace(d)
	require.NoError(t, err)
	reqs, _, err := Simulate(tr, p.Plan.WithModels(scaled{p.Engine().FPM, 1.3}, p.Engine().Host))
	require.NoError(t, err)
	sum, err := CompareRequests(tr.Rec, reqs, nil)
	require.NoError(t, err)
	assert.Greater(t, sum.ITL.RelErr["mean"], 0.15)
	assert.Greater(t, sum.E2E.RelErr["mean"], 0.15)
}

type scaled struct {
	f fpm.FPM
	k float64
}

func (s scaled) PredictNs(f fpm.Features) float64 { return s.k * s.f.PredictNs(f) }

// Manifest without an engine section: defaults with warnings.
func TestPlanFromManifestDefaults(t *testing.T) {
	m := &datasets.Manifest{Hardware: &datasets.Hardware{GPUName: "H200"}, Model: &datasets.ModelShape{Name: "Llama-3.1-8B"}}
	p, warn, err := scenario.PlanFromManifest(m, scenario.ManifestOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, warn)
	assert.Equal(t, 256, p.Engine().Sched.MaxNumSeqs)
}

// A trace without recorded latencies (an imported arrival trace) has
// nothing to compare: refused, pointing at simulate.
func TestLoadTraceWithoutLatencies(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "trace")
	w, err := datasets.Create(dir, datasets.Manifest{Source: datasets.Source{Kind: "import", Format: "test"}}, datasets.CreateOptions{})
	require.NoError(t, err)
	tw, err := datasets.NewTableWriter[datasets.Request](w, datasets.TableRequests, datasets.DefaultTableOptions)
	require.NoError(t, err)
	require.NoError(t, tw.Write([]datasets.Request{
		{ReqID: "a", ArrivalNs: 0, PromptTokens: 10, OutputTokens: 5, FirstScheduledNs: -1, FirstTokenNs: -1, FinishNs: -1, Status: datasets.StatusNotRun},
		{ReqID: "b", ArrivalNs: 9, PromptTokens: 12, OutputTokens: 3, FirstScheduledNs: -1, FirstTokenNs: -1, FinishNs: -1, Status: datasets.StatusNotRun},
	}))
	require.NoError(t, tw.Close())
	require.NoError(t, w.Close())
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	_, err = LoadTrace(d)
	assert.ErrorContains(t, err, "records no request latencies")
	assert.ErrorContains(t, err, "steplab simulate --set workload.trace="+dir)
}
