package sim_test

import (
	"github.com/steplab/steplab/internal/rewrite"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
)

// datasetSHA hashes every file of a dataset directory (names and bytes) in
// a fixed order.
func datasetSHA(t *testing.T, dir string) string {
	t.Helper()
	sha, err := datasets.DirSHA256(dir)
	require.NoError(t, err)
	return sha
}

func poissonScenario(seed uint64) scenario.Scenario {
	sc := scenario.Default()
	sc.Seed = seed
	sc.Workload = scenario.WorkloadSpec{Kind: "poisson", RateRPS: 40, Requests: 400,
		Prompt: scenario.LengthSpec{Kind: "lognormal", Mean: 900, Sigma: 0.8, Max: 8000},
		Output: scenario.LengthSpec{Kind: "lognormal", Mean: 150, Sigma: 0.7, Max: 2000}}
	sc.Engine.NumGPUBlocks = 3000 // tight: forces preemptions
	return sc
}

func simulateSHA(t *testing.T, sc scenario.Scenario) (string, *sim.Result) {
	t.Helper()
	p, err := sc.Plan()
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "ds")
	res, err := scenario.Run(p, dir, sim.RunOptions{Command: []string{"steplab", "simulate"}})
	require.NoError(t, err)
	return datasetSHA(t, dir), res
}

// The same scenario and seed give a byte-identical dataset; its SHA-256 is
// pinned in testdata/golden_sha256.txt (refresh with -rewrite when a change
// of the model is intended). A different seed changes it.
func TestDeterministicDataset(t *testing.T) {
	a, res := simulateSHA(t, poissonScenario(7))
	b, _ := simulateSHA(t, poissonScenario(7))
	require.Equal(t, a, b, "two runs with one seed")
	require.Greater(t, res.Preemptions, int64(0), "the scenario exercises preemption")
	c, _ := simulateSHA(t, poissonScenario(8))
	require.NotEqual(t, a, c, "another seed")

	golden := filepath.Join("testdata", "golden_sha256.txt")
	if rewrite.Requested() {
		require.NoError(t, os.WriteFile(golden, []byte(a+"\n"), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run with -rewrite to create the golden file")
	require.Equal(t, strings.TrimSpace(string(want)), a, "dataset bytes changed; if intended, rerun with -rewrite")
}

// Bad scenarios are refused before anything is simulated, with a message
// that says what to change.
func TestBadScenarioRefused(t *testing.T) {
	cases := []struct {
		name string
		edit func(*scenario.Scenario)
		want string
	}{
		{"negative rate", func(s *scenario.Scenario) {
			s.Workload = scenario.WorkloadSpec{Kind: "poisson", RateRPS: -3, Requests: 10,
				Prompt: scenario.LengthSpec{Kind: "fixed", Value: 10}, Output: scenario.LengthSpec{Kind: "fixed", Value: 10}}
		}, "rate_rps is -3"},
		{"block size not a power of two", func(s *scenario.Scenario) { s.Engine.BlockSize = 24 }, "block_size is 24"},
		{"block size does not divide the trace's hash block", func(s *scenario.Scenario) {
			s.Engine.BlockSize = 1024
			s.Engine.MaxNumBatchedTokens = 32768
			s.Workload.BlockSize = 512
		}, "does not divide"},
		{"context longer than max_model_len", func(s *scenario.Scenario) {
			s.Workload = scenario.WorkloadSpec{Kind: "constant", RateRPS: 1, Requests: 10,
				Prompt: scenario.LengthSpec{Kind: "fixed", Value: 40000}, Output: scenario.LengthSpec{Kind: "fixed", Value: 10}}
		}, "exceed max_model_len"},
		{"model does not fit", func(s *scenario.Scenario) { s.Model = "Llama-3.1-70B"; s.Hardware = "H100" },
			"model: Llama-3.1-70B does not fit on H100-SXM: it needs 141 GB of weights per GPU at TP=1"},
		{"the suggested tensor_parallel=2 is the key", func(s *scenario.Scenario) { s.Model = "Llama-3.1-70B"; s.Hardware = "H100" },
			"raise tensor parallel to 2 or more (tensor_parallel=2)"},
		{"at TP 2 the KV capacity is sized from memory", func(s *scenario.Scenario) {
			s.Model, s.Hardware, s.TensorParallel = "Llama-3.1-70B", "H100", 2
		}, "set engine.max_model_len=27696 or engine.num_gpu_blocks=2049 (engine.num_gpu_blocks=1732 is what fits on H100-SXM at TP=2"},
		{"no room for the KV cache", func(s *scenario.Scenario) { s.Hardware = "H100"; s.Engine.GPUMemoryUtilization = 0.2 },
			"set engine.gpu_memory_utilization=0.22 or tensor_parallel=2"},
		{"unknown hardware", func(s *scenario.Scenario) { s.Hardware = "TPU" }, `hardware: unknown hardware "TPU": nearest known:`},
		{"unknown model", func(s *scenario.Scenario) { s.Model = "Llama-3.1-8Bx" }, `model: unknown model "Llama-3.1-8Bx": nearest known: Llama-3.1-8B`},
		{"max_num_seqs zero", func(s *scenario.Scenario) { s.Engine.MaxNumSeqs = 0 }, "engine.max_num_seqs is 0: set engine.max_num_seqs=1 or more"},
		{"max_model_len beyond KV", func(s *scenario.Scenario) { s.Engine.NumGPUBlocks = 100 }, "set engine.max_model_len=1584 or engine.num_gpu_blocks=2049"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc := scenario.Default()
			c.edit(&sc)
			_, err := sc.Plan()
			require.Error(t, err)
			require.Contains(t, err.Error(), c.want)
			for _, stutter := range []string{"model: model:", "hardware: model:", "engine: engine", "sched: invalid config"} {
				assert.NotContains(t, err.Error(), stutter)
			}
		})
	}
}

func TestScenarioYAMLUnknownKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.yaml")
	require.NoError(t, os.WriteFile(p, []byte("seed: 3\nengine:\n  max_num_seqz: 4\n"), 0o644))
	_, err := scenario.Load(p)
	require.ErrorContains(t, err, p+`:3: unknown key "max_num_seqz" in engine: known keys are max_num_seqs, max_num_batched_tokens,`)
	require.NotContains(t, err.Error(), "scenario.", "no Go type in the message")
	sc := scenario.Default()
	require.NoError(t, sc.Set("engine.max_num_seqs=64"))
	require.Equal(t, 64, sc.Engine.MaxNumSeqs)
	require.EqualError(t, sc.Set("nope=1"), `--set nope=1: unknown key "nope": known keys are name, seed, hardware, model, tensor_parallel, weight_dtype, kv_cache_dtype, fpm, host, engine, workload, output, cluster, slo`)
	require.ErrorContains(t, sc.Set("workload.prompt.kindd=fixed"), `unknown key "kindd" in workload.prompt: known keys are kind, value, min, max, mean, sigma`)

	// An empty file is the defaults.
	require.NoError(t, os.WriteFile(p, nil, 0o644))
	sc, err = scenario.Load(p)
	require.NoError(t, err)
	require.Equal(t, scenario.Default(), sc)
	require.NoError(t, sc.Set("engine.async_scheduling=false"))
	require.False(t, sc.Engine.AsyncScheduling)
	require.True(t, sc.Engine.ChunkedPrefill, "one override leaves the other booleans alone")
	require.True(t, sc.Engine.PrefixCaching)
}

// A host model fitted from captures replaces the prior; a bad file is
// refused with its path.
func TestScenarioHostModel(t *testing.T) {
	sc := scenario.Default()
	sc.Host = filepath.Join("..", "datasets", "h200", "models", "host.json")
	p, err := sc.Plan()
	require.NoError(t, err)
	require.InDelta(t, 57.6, p.Engine().Host.ShipMBps, 0.1, "the fitted ship bandwidth, not the default 200 MB/s")
	bad := filepath.Join(t.TempDir(), "h.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"ship_mb_per_s": -1}`), 0o644))
	sc.Host = bad
	_, err = sc.Plan()
	require.ErrorContains(t, err, "h.json")
}

// The dataset does not depend on the processors its parts are encoded on
// (datasets.EncodersFor of GOMAXPROCS: none on one, pipelined on more).
func TestDatasetSameOnAnyProcs(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)
	want, err := os.ReadFile(filepath.Join("testdata", "golden_sha256.txt"))
	require.NoError(t, err)
	for _, p := range []int{1, 2, 3, 8} {
		runtime.GOMAXPROCS(p)
		got, _ := simulateSHA(t, poissonScenario(7))
		require.Equal(t, strings.TrimSpace(string(want)), got, "GOMAXPROCS=%d", p)
	}
}

// Across part boundaries too: a run long enough that step_requests fills
// several parts, at a load where most steps decode one request, so that a
// step's rows often end a part exactly (the steps record into the rows the
// writer lends, which a pipelined writer holds in its open part), writes
// the same files on one processor (the sequential writer) as on more (the
// pipelined one).
func TestDatasetSameOnAnyProcsAcrossParts(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)
	sc := poissonScenario(7)
	sc.Workload.Requests, sc.Workload.RateRPS = 1500, 1
	p, err := sc.Plan()
	require.NoError(t, err)
	var want string
	for _, n := range []int{1, 2, 4} {
		runtime.GOMAXPROCS(n)
		dir := filepath.Join(t.TempDir(), "ds")
		_, err := scenario.Run(p, dir, sim.RunOptions{Command: []string{"steplab", "simulate"}})
		require.NoError(t, err)
		got := datasetSHA(t, dir)
		if n == 1 {
			m, err := datasets.ReadManifest(dir)
			require.NoError(t, err)
			require.Greater(t, len(m.Tables[datasets.TableStepRequests].Parts), 3, "the run spans parts")
			want = got
		}
		require.Equal(t, want, got, "GOMAXPROCS=%d", n)
	}
}
