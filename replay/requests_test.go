package replay

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/validate"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
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

// A recorded run whose requests share prefixes replays with the prefix
// hits of the simulate of the same trace: LoadTrace converts the requests
// as simulate's trace workload does (workload.TraceArrival and
// EngineBlockHashes), keeping the hash chain.
func TestReplayRequestsSharesPrefixes(t *testing.T) {
	const hashBlock = 64
	rows := make([]datasets.Request, 60)
	for i := range rows {
		// Three prefix groups of 8 blocks (512 tokens) ahead of a
		// 100-token suffix of the request's own.
		g := int64(i % 3)
		ids := make([]int64, 0, 9)
		for k := range int64(8) {
			ids = append(ids, g<<20|k)
		}
		rows[i] = datasets.Request{ReqID: fmt.Sprintf("r%02d", i), ArrivalNs: int64(i) * 20e6, PromptTokens: 612, OutputTokens: 40,
			PrefixHashIDs: append(ids, 1<<40|int64(i)), FirstScheduledNs: -1, FirstTokenNs: -1, FinishNs: -1, Status: datasets.StatusNotRun}
	}
	params := map[string]string{datasets.ParamHashBlockSize: fmt.Sprint(hashBlock)}
	traceDir := writeRequests(t, "trace", datasets.Manifest{Source: datasets.Source{Kind: "import", Format: "test"},
		Workload: &datasets.Workload{Kind: "trace", Params: params}}, rows)

	sc := scenario.Default()
	sc.Workload = scenario.WorkloadSpec{Kind: "trace", Trace: traceDir}
	p, err := sc.Plan()
	require.NoError(t, err)
	require.True(t, p.Engine().Sched.PrefixCaching)
	runDir := filepath.Join(t.TempDir(), "run")
	res, err := scenario.Run(p, runDir, sim.RunOptions{})
	require.NoError(t, err)
	require.Positive(t, res.Engine.PrefixHitTokens, "the simulate shares prefixes")

	// The recorded run: the simulate's requests with the trace's prefix
	// hashes, and its manifest with their block size (what a capture of
	// the trace records).
	run, err := datasets.Open(runDir)
	require.NoError(t, err)
	simReqs, err := datasets.ReadAll[datasets.Request](run, datasets.TableRequests)
	require.NoError(t, err)
	byID := map[string][]int64{}
	for _, r := range rows {
		byID[r.ReqID] = r.PrefixHashIDs
	}
	for i := range simReqs {
		simReqs[i].PrefixHashIDs = byID[simReqs[i].ReqID]
	}
	m := *run.Manifest
	m.Workload = &datasets.Workload{Kind: "trace", Params: params}
	rec, err := datasets.Open(writeRequests(t, "recorded", m, simReqs))
	require.NoError(t, err)

	tr, err := LoadTrace(rec)
	require.NoError(t, err)
	assert.Equal(t, hashBlock, tr.HashBlock)
	back, _, err := scenario.PlanFromManifest(rec.Manifest, scenario.ManifestOptions{})
	require.NoError(t, err)
	reqs, comp, err := Simulate(tr, back.Plan)
	require.NoError(t, err)
	assert.Equal(t, res.Engine.PrefixHitTokens, comp.PrefixHitTokens, "replay and simulate find the same prefix hits")
	sum, err := CompareRequests(tr.Rec, reqs, nil)
	require.NoError(t, err)
	assert.Equal(t, len(rows), sum.Compared)
	assert.Zero(t, sum.E2E.MAPE, "the replay reproduces the simulate's latencies")
}

// writeRequests writes a dataset of requests alone under a test directory.
func writeRequests(t *testing.T, name string, m datasets.Manifest, rows []datasets.Request) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	w, err := datasets.Create(dir, m, datasets.CreateOptions{})
	require.NoError(t, err)
	tw, err := datasets.NewTableWriter[datasets.Request](w, datasets.TableRequests, datasets.DefaultTableOptions)
	require.NoError(t, err)
	require.NoError(t, tw.Write(rows))
	require.NoError(t, tw.Close())
	require.NoError(t, w.Close())
	return dir
}

// Prefix hashes without a recorded block size are refused, not guessed.
func TestLoadTraceHashBlockUnknown(t *testing.T) {
	dir := writeRequests(t, "trace", datasets.Manifest{Source: datasets.Source{Kind: "import", Format: "test"}}, []datasets.Request{
		{ReqID: "a", PromptTokens: 10, OutputTokens: 5, PrefixHashIDs: []int64{1}, FirstScheduledNs: 1, FirstTokenNs: 2, FinishNs: 3, Status: datasets.StatusFinished},
	})
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	_, err = LoadTrace(d)
	assert.ErrorContains(t, err, "requests carry prefix_hash_ids but the manifest records no workload.params.hash_block_size")
}
