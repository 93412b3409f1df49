package replay

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/importers"
	"github.com/steplab/steplab/scenario"
)

// withEngineSamples copies the requests of a simulated run into a new
// dataset and adds the engine samples a stats logger ticking every 0.5 s
// would have written of that run: the state after the last step of each
// tick. shift moves the samples' times (a misaligned record).
func withEngineSamples(t *testing.T, dir string, shift int64) string {
	t.Helper()
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	reqs, err := datasets.ReadAll[datasets.Request](d, datasets.TableRequests)
	require.NoError(t, err)
	steps, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
	require.NoError(t, err)
	const tick = 500_000_000
	var samples []datasets.EngineSample
	j := -1
	for tk := int64(tick); j+1 < len(steps); tk += tick {
		for j+1 < len(steps) && steps[j+1].TUpdateEnd <= tk {
			j++
		}
		if j < 0 {
			continue
		}
		st := steps[j]
		samples = append(samples, datasets.EngineSample{TNs: tk + shift, NumRunning: st.NumRunning, NumWaiting: st.NumWaiting,
			KVUsage: float64(st.KVBlocksUsed) / float64(st.KVBlocksTotal), PromptTokensPerS: -1, GenerationTokensPerS: -1, WindowNs: tick})
	}
	out := filepath.Join(t.TempDir(), "rec")
	w, err := datasets.Create(out, *d.Manifest, datasets.CreateOptions{})
	require.NoError(t, err)
	rt, err := datasets.NewTableWriter[datasets.Request](w, datasets.TableRequests, datasets.DefaultTableOptions)
	require.NoError(t, err)
	require.NoError(t, rt.Write(reqs))
	require.NoError(t, rt.Close())
	et, err := datasets.NewTableWriter[datasets.EngineSample](w, datasets.TableEngineSamples, datasets.DefaultTableOptions)
	require.NoError(t, err)
	require.NoError(t, et.Write(samples))
	require.NoError(t, et.Close())
	require.NoError(t, w.Close())
	return out
}

// Replaying a run with its own model reproduces its engine curves exactly;
// a record shifted by 3 s does not match.
func TestReplayRequestsEngineCurves(t *testing.T) {
	src, p := simulated(t, "preempting")
	for _, tc := range []struct {
		name  string
		shift int64
		exact bool
	}{{"aligned", 0, true}, {"shifted", 3_000_000_000, false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := withEngineSamples(t, src, tc.shift)
			d, err := datasets.Open(dir)
			require.NoError(t, err)
			out := filepath.Join(t.TempDir(), "out")
			sum, err := RunRequests(d, RequestOptions{Plan: p.Plan}, Output{Dir: out, DatasetDir: dir, ModelName: "roofline"})
			require.NoError(t, err)
			c := sum.EngineCurves
			require.NotNil(t, c)
			require.NotNil(t, c.KVUsage)
			assert.Greater(t, c.Running.RecMean, 1.0)
			assert.Greater(t, c.KVUsage.RecMean, 0.01)
			if tc.exact {
				assert.Zero(t, c.Running.MAE)
				assert.Zero(t, c.Waiting.MAE)
				assert.Zero(t, c.KVUsage.MAE)
				assert.Equal(t, c.Running.RecMean, c.Running.PredMean)
			} else {
				assert.Greater(t, c.Running.MAE, 1.0)
			}
			o, err := datasets.Open(out)
			require.NoError(t, err)
			rows, err := datasets.ReadAll[CurveRow](o, datasets.TableEngineSamples)
			require.NoError(t, err)
			assert.Len(t, rows, c.Samples)
			for _, f := range []string{"engine.running.png", "engine.waiting.svg", "engine.kv_usage.png"} {
				_, err := os.Stat(filepath.Join(out, f))
				assert.NoError(t, err, f)
			}
		})
	}
}

// Samples without KV usage compare running and waiting only; the empty
// engine before the first step reads as zero.
func TestCurvesWithoutKVUsage(t *testing.T) {
	c := &curveRecorder{rec: []datasets.EngineSample{
		{TNs: 5, NumRunning: 0, KVUsage: -1},
		{TNs: 20, NumRunning: 3, NumWaiting: 1, KVUsage: -1},
		{TNs: 40, NumRunning: 1, KVUsage: -1},
	}, ranks: 1}
	hook := c.stepHook()
	hook(&datasets.Step{TUpdateEnd: 10, NumRunning: 2, NumWaiting: 2, KVBlocksUsed: 5, KVBlocksTotal: 10})
	hook(&datasets.Step{TUpdateEnd: 30, NumRunning: 1, KVBlocksUsed: 1, KVBlocksTotal: 10})
	s := c.compare()
	assert.Nil(t, s.KVUsage)
	assert.Contains(t, s.Notes[0], "no KV usage")
	assert.Equal(t, []int32{0, 2, 1}, []int32{s.rows[0].PredRunning, s.rows[1].PredRunning, s.rows[2].PredRunning})
	assert.InDelta(t, (0+1+0)/3.0, s.Running.MAE, 1e-12)
	assert.InDelta(t, 1/3.0, s.Waiting.MAE, 1e-12)
	assert.Equal(t, 1.0, s.Running.MaxAbs)
	assert.InDelta(t, 0.5, s.rows[1].PredKVUsage, 1e-12)
	var nilRec *curveRecorder
	assert.Nil(t, nilRec.stepHook())
	assert.Nil(t, nilRec.compare())
}

// An imported vLLM run whose meta.json records what vLLM allocated replays
// on exactly that engine: its num_gpu_blocks, not an estimate.
func TestPlanFromManifestImportedVLLMRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rtx4090")
	_, err := importers.Import("vllm-requests", filepath.Join("..", "datasets", "importers", "testdata", "llmservingsim-rtx4090-llama-3.1-8b"), dir, importers.Options{})
	require.NoError(t, err)
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	e, warn, err := scenario.PlanFromManifest(d.Manifest, scenario.ManifestOptions{})
	require.NoError(t, err)
	assert.Equal(t, 2588, e.Engine().Sched.NumGPUBlocks)
	assert.Equal(t, 256, e.Engine().Sched.MaxNumSeqs)
	assert.Equal(t, 32768, e.Engine().Sched.MaxModelLen)
	assert.True(t, e.Engine().Async)
	assert.Len(t, e.Engine().Graphs, 51)
	assert.Equal(t, "RTX-4090", e.Engine().HW.Name, "the catalogue knows the GPU vLLM ran on")
	assert.Empty(t, warn, "everything the engine needs is recorded")
}

// With several engines the simulated state is every engine's latest,
// summed (KV usage over all their blocks), whatever order their steps
// reach the recorder in; a record of several ranks is summed at each
// sample time.
func TestCurvesOfSeveralEngines(t *testing.T) {
	rec := sumRanks([]datasets.EngineSample{
		{TNs: 20, DPRank: 0, NumRunning: 2, NumWaiting: 1, KVUsage: 0.5},
		{TNs: 20, DPRank: 1, NumRunning: 1, NumWaiting: 0, KVUsage: 0.3},
		{TNs: 40, DPRank: 0, NumRunning: 1, KVUsage: -1},
		{TNs: 40, DPRank: 1, NumRunning: 2, KVUsage: 0.2},
	}, 2)
	require.Len(t, rec, 2)
	assert.Equal(t, datasets.EngineSample{TNs: 20, DPRank: -1, NumRunning: 3, NumWaiting: 1, KVUsage: 0.4}, rec[0])
	assert.Equal(t, 0.2, rec[1].KVUsage, "the rank that recorded it")

	c := &curveRecorder{rec: rec, ranks: 2}
	hook := c.stepHook()
	hook(&datasets.Step{WorkerID: "dp-0", TUpdateEnd: 10, NumRunning: 2, NumWaiting: 1, KVBlocksUsed: 4, KVBlocksTotal: 10})
	hook(&datasets.Step{WorkerID: "dp-1", TUpdateEnd: 12, NumRunning: 1, KVBlocksUsed: 4, KVBlocksTotal: 10})
	hook(&datasets.Step{WorkerID: "dp-1", TUpdateEnd: 35, NumRunning: 3, KVBlocksUsed: 6, KVBlocksTotal: 10})
	hook(&datasets.Step{WorkerID: "dp-0", TUpdateEnd: 30, NumRunning: 0, KVBlocksUsed: 0, KVBlocksTotal: 10})
	s := c.compare()
	require.Len(t, s.rows, 2)
	assert.Equal(t, CurveRow{TNs: 20, RecRunning: 3, PredRunning: 3, RecWaiting: 1, PredWaiting: 1, RecKVUsage: 0.4, PredKVUsage: 0.4}, s.rows[0])
	assert.Equal(t, int32(3), s.rows[1].PredRunning, "dp-0 idle, dp-1 running 3")
	assert.InDelta(t, 0.3, s.rows[1].PredKVUsage, 1e-12)
	assert.Contains(t, s.Notes, "the record has samples of 2 data-parallel ranks, summed at each sample time")
	assert.Contains(t, s.Notes, "the simulated state is the sum over its 2 engines")
}
