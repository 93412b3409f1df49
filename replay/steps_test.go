package replay

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/pricing"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
)

// simDataset simulates a small scenario once per (name) and returns its
// directory and plan.
var simCache sync.Map

type simOut struct {
	dir  string
	plan *scenario.Plan
	err  error
}

// scenarios are the simulated runs the tests replay, by name: one scenario
// per name, so the cache of simulated below can never hand one test
// another's run.
var scenarios = map[string]func(*scenario.Scenario){
	"async":                  func(*scenario.Scenario) {},
	"sync":                   func(sc *scenario.Scenario) { sc.Engine.AsyncScheduling = false },
	"preempting":             func(sc *scenario.Scenario) { sc.Engine.NumGPUBlocks = 1500; sc.Engine.MaxModelLen = 16384 },
	"no-graphs-small-budget": func(sc *scenario.Scenario) { sc.Engine.CUDAGraphSizes = nil; sc.Engine.MaxNumBatchedTokens = 1024 },
	// serial: a worker that runs each step to its end (steplab's GPU
	// worker), with an output path after the forward pass.
	"serial": func(sc *scenario.Scenario) { sc.Engine.SerialWorker, sc.Host = true, "testdata/host-output.json" },
	// bench is a run of ~100k steps (benchmarks).
	"bench": func(sc *scenario.Scenario) {
		sc.Workload = scenario.WorkloadSpec{Kind: "poisson", RateRPS: 10, Requests: 5000,
			Prompt: scenario.LengthSpec{Kind: "lognormal", Mean: 900, Sigma: 0.8, Max: 6000},
			Output: scenario.LengthSpec{Kind: "lognormal", Mean: 250, Sigma: 0.7, Max: 2000}}
	},
}

func simulated(t testing.TB, name string) (string, *scenario.Plan) {
	t.Helper()
	mod, ok := scenarios[name]
	require.True(t, ok, "no scenario %q", name)
	if v, ok := simCache.Load(name); ok {
		o := v.(*simOut)
		require.NoError(t, o.err)
		return o.dir, o.plan
	}
	sc := scenario.Default()
	sc.Seed = 7
	sc.Workload = scenario.WorkloadSpec{Kind: "poisson", RateRPS: 30, Requests: 300,
		Prompt: scenario.LengthSpec{Kind: "lognormal", Mean: 900, Sigma: 0.8, Max: 6000},
		Output: scenario.LengthSpec{Kind: "lognormal", Mean: 120, Sigma: 0.7, Max: 1000}}
	mod(&sc)
	p, err := sc.Plan()
	require.NoError(t, err)
	dir := filepath.Join(sharedTmp(t), name)
	_, err = scenario.Run(p, dir, sim.RunOptions{Overwrite: true})
	simCache.Store(name, &simOut{dir: dir, plan: p, err: err})
	require.NoError(t, err)
	return dir, p
}

var tmpOnce sync.Once
var tmpDir string

func sharedTmp(t testing.TB) string {
	tmpOnce.Do(func() {
		d, err := os.MkdirTemp("", "steplab-replay-test-*")
		if err != nil {
			t.Fatal(err)
		}
		tmpDir = d
	})
	return tmpDir
}

func replayAll(t *testing.T, dir string, opts StepOptions) (*StepSummary, []StepRow) {
	t.Helper()
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	var rows []StepRow
	opts.Row = func(r *StepRow) error { rows = append(rows, *r); return nil }
	s, err := ReplaySteps(d, opts)
	require.NoError(t, err)
	return s, rows
}

// Step replay of a simulated dataset with the model that generated it
// reproduces every timing field to the nanosecond: gpu, host prep and
// schedule are determined by the step; narrow and wall time depend on the
// previous step (async pipeline; a serial worker's reply) and are
// re-derived one step ahead.
func TestReplayStepsExactWithGeneratingModel(t *testing.T) {
	for _, name := range []string{"async", "sync", "preempting", "no-graphs-small-budget", "serial"} {
		t.Run(name, func(t *testing.T) {
			dir, p := simulated(t, name)
			sum, rows := replayAll(t, dir, StepOptions{FPM: p.Engine().FPM, Host: p.Engine().Host})
			require.NotEmpty(t, rows)
			assert.True(t, sum.UsedStepRequests)
			for _, r := range rows {
				require.Equal(t, r.RecGPU, r.PredGPU, "gpu step %d", r.StepID)
				require.Equal(t, r.RecPrep, r.PredPrep, "prep step %d", r.StepID)
				require.Equal(t, r.RecSched, r.PredSched, "schedule step %d", r.StepID)
				require.Equal(t, r.RecNarrow, r.PredNarrow, "narrow step %d (%s)", r.StepID, r.Kind)
				require.Equal(t, r.RecWall, r.PredWall, "wall step %d (%s)", r.StepID, r.Kind)
			}
			for _, f := range Fields {
				st := sum.Overall.Fields[f]
				assert.Equal(t, st.N, st.Exact, f)
				assert.Zero(t, st.MAPE, f)
			}
			if name == "preempting" {
				d, _ := datasets.Open(dir)
				steps, _ := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
				var pre int32
				for _, s := range steps {
					pre += s.NumPreempted
				}
				assert.Positive(t, pre, "the scenario should preempt")
			}
		})
	}
}

// Without step_requests a dataset that records every feature column still
// replays exactly; one written before those columns (the committed H200
// grid) derives them from step_requests, and without those approximates
// the rest and says so. A model that reads a feature the dataset cannot
// give is an error naming the column.
func TestReplayStepsWithoutStepRequests(t *testing.T) {
	dir, p := simulated(t, "async")
	sum, _ := replayAll(t, dir, StepOptions{FPM: p.Engine().FPM, Host: p.Engine().Host, NoJoin: true})
	assert.False(t, sum.UsedStepRequests)
	assert.Empty(t, sum.Notes)
	g := sum.Overall.Fields[FieldGPU]
	assert.Equal(t, g.N, g.Exact)

	grid := filepath.Join("..", "datasets", "h200", "bench-steady")
	fpModel, _, err := pricing.Load(filepath.Join("..", "datasets", "h200", "models", "steady-gpu.json"))
	require.NoError(t, err)
	joined, _ := replayAll(t, grid, StepOptions{FPM: fpModel, Host: p.Engine().Host})
	assert.True(t, joined.UsedStepRequests)
	assert.Empty(t, joined.Notes)

	// The steps table alone, under the minimal manifest a user writes.
	bare := t.TempDir()
	require.NoError(t, os.CopyFS(filepath.Join(bare, "steps.parquet"), os.DirFS(filepath.Join(grid, "steps.parquet"))))
	require.NoError(t, os.WriteFile(filepath.Join(bare, "manifest.json"), []byte(`{"schema_version": 1,
  "hardware": {"gpu_name": "H200"}, "model": {"name": "Llama-3.1-8B"},
  "measurement_policy": {"decode": "steady_state_second_step", "prefill": "single_step"}}`), 0o644))
	alone, _ := replayAll(t, bare, StepOptions{FPM: fpModel, Host: p.Engine().Host})
	assert.False(t, alone.UsedStepRequests)
	require.Len(t, alone.Notes, 1)
	assert.Contains(t, alone.Notes[0], "no step_requests table")
	assert.Equal(t, joined.Overall.Fields[FieldGPU].MAPE, alone.Overall.Fields[FieldGPU].MAPE,
		"one request per prefill step and equal decode contexts: the steps table determines the features")

	// The H200 traffic predates max_decode_kv_tokens and its batches are
	// ragged: a model that reads the longest context needs step_requests.
	traffic := filepath.Join("..", "datasets", "h200", "traffic-azure-12rps")
	needs, err := fpm.NewLinear([]string{fpm.TermConst, fpm.TermDecodeMaxKV}, []float64{1e6, 10})
	require.NoError(t, err)
	sum, _ = replayAll(t, traffic, StepOptions{FPM: needs, Host: p.Engine().Host})
	assert.True(t, sum.UsedStepRequests)
	assert.Empty(t, sum.Notes)
	d, err := datasets.Open(traffic)
	require.NoError(t, err)
	_, err = ReplaySteps(d, StepOptions{FPM: needs, Host: p.Engine().Host, NoJoin: true})
	require.ErrorContains(t, err, "max_decode_kv_tokens")
}

// A linear model priced exactly, then one whose decode_kv_tokens
// coefficient is scaled ×1.5: the report attributes the error to that term.
func TestReplayStepsAttributesPerturbedTerm(t *testing.T) {
	terms := []string{fpm.TermConst, fpm.TermPrefillTokens, fpm.TermPrefillAttn, fpm.TermDecodeRequests,
		fpm.TermDecodeKVTokens, fpm.TermNewReqTokens}
	coef := []float64{4.5e6, 9e3, 0.02, 2.5e4, 30, 8}
	truth, err := fpm.NewLinear(terms, coef)
	require.NoError(t, err)
	dir := simulateWith(t, "linear-gen", truth)
	host := fpm.DefaultHostModel()

	sum, _ := replayAll(t, dir, StepOptions{FPM: truth, Host: host})
	require.Equal(t, sum.Overall.Fields[FieldGPU].N, sum.Overall.Fields[FieldGPU].Exact)

	cases := []struct {
		term      string
		scale     float64
		collinear string // a term the record cannot tell apart from term
	}{
		{fpm.TermDecodeKVTokens, 1.5, ""},
		{fpm.TermDecodeRequests, 0.8, ""},
		{fpm.TermConst, 1.2, ""},
		// Unchunked prompts without prefix hits: prefill tokens equal the
		// new requests' prompt tokens step by step.
		{fpm.TermPrefillTokens, 0.7, fpm.TermNewReqTokens},
	}
	for _, c := range cases {
		t.Run(c.term, func(t *testing.T) {
			pc := append([]float64(nil), coef...)
			for i, n := range terms {
				if n == c.term {
					pc[i] *= c.scale
				}
			}
			pert, err := fpm.NewLinear(terms, pc)
			require.NoError(t, err)
			sum, _ := replayAll(t, dir, StepOptions{FPM: pert, Host: host})
			at := sum.Attribution
			require.NotNil(t, at)
			assert.Equal(t, FieldGPU, at.Target)
			assert.InDelta(t, 1, at.R2, 1e-6)
			if c.collinear != "" {
				assert.Contains(t, []string{c.term, c.collinear}, at.Top)
				other := c.term
				if at.Top == c.term {
					other = c.collinear
				}
				assert.Contains(t, at.Collinear, other)
				return
			}
			assert.Equal(t, c.term, at.Top)
			assert.Greater(t, at.Terms[0].Share, 0.99)
			require.NotNil(t, at.Terms[0].RelCoef)
			assert.InDelta(t, c.scale-1, *at.Terms[0].RelCoef, 1e-6)
			// Device-time error is positive where the term is present.
			require.NotEmpty(t, sum.Top)
			assert.NotEmpty(t, sum.Top[0].Contributions)
		})
	}
}

func simulateWith(t *testing.T, name string, fpModel fpm.FPM) string {
	t.Helper()
	if v, ok := simCache.Load(name); ok {
		return v.(*simOut).dir
	}
	sc := scenario.Default()
	sc.Seed = 11
	sc.Workload = scenario.WorkloadSpec{Kind: "poisson", RateRPS: 30, Requests: 300,
		Prompt: scenario.LengthSpec{Kind: "lognormal", Mean: 900, Sigma: 0.8, Max: 6000},
		Output: scenario.LengthSpec{Kind: "lognormal", Mean: 120, Sigma: 0.7, Max: 1000}}
	p, err := sc.Plan()
	require.NoError(t, err)
	p.Engine().FPM, p.Engine().FPMName = fpModel, "test-linear"
	dir := filepath.Join(sharedTmp(t), name)
	_, err = scenario.Run(p, dir, sim.RunOptions{Overwrite: true})
	require.NoError(t, err)
	simCache.Store(name, &simOut{dir: dir, plan: p})
	return dir
}

func TestBatchBucket(t *testing.T) {
	cases := map[int32]string{0: "1", 1: "1", 2: "2-4", 4: "2-4", 5: "5-8", 8: "5-8", 9: "9-16", 256: "129-256", 257: "257-512", 512: "257-512", 513: ">512"}
	for b, want := range cases {
		assert.Equal(t, want, batchBuckets[batchBucket(b)], "batch %d", b)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if tmpDir != "" {
		os.RemoveAll(tmpDir)
	}
	os.Exit(code)
}

// onePerStep prices as its FPM and says every step left its measured
// range in one operation.
type onePerStep struct{ fpm.FPM }

func (e onePerStep) PredictExtNs(f fpm.Features) (float64, int) { return e.PredictNs(f), 1 }

// A step replay counts the lookups the model priced past its measured
// range, and says so in a note; a model that does not say counts none.
func TestReplayStepsExtrapolatedOps(t *testing.T) {
	dir, p := simulated(t, "async")
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	sum, err := ReplaySteps(d, StepOptions{FPM: onePerStep{p.Engine().FPM}, Host: p.Engine().Host})
	require.NoError(t, err)
	assert.Equal(t, sum.Steps, sum.ExtrapolatedOps)
	assert.Contains(t, sum.Notes, sim.ExtrapolatedNote(sum.Steps))
	sum, err = ReplaySteps(d, StepOptions{FPM: p.Engine().FPM, Host: p.Engine().Host})
	require.NoError(t, err)
	assert.Zero(t, sum.ExtrapolatedOps)
}
