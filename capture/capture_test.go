package capture

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/validate"
	"github.com/steplab/steplab/scenario"
)

// python is the interpreter the tests use: Debian's, which has msgpack and
// (where python3-torch is installed, as in CI) PyTorch.
const python = "/usr/bin/python3"

// inCI reports a CI run, where a missing Python dependency is a failure.
func inCI() bool { return os.Getenv("CI") == "true" }

// requirePython skips (or, in CI, fails) unless python can import modules.
func requirePython(t *testing.T, modules ...string) {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		if inCI() {
			t.Fatalf(format+" (CI=true: install it, e.g. apt-get install python3-msgpack python3-torch)", args...)
		}
		t.Skipf(format+"; skipping (CI installs it)", args...)
	}
	if _, err := os.Stat(python); err != nil {
		missing("%s is missing", python)
	}
	for _, m := range modules {
		if out, err := exec.Command(python, "-c", "import "+m).CombinedOutput(); err != nil {
			missing("%s cannot import %s: %s", python, m, strings.TrimSpace(string(out)))
		}
	}
}

// tinyScenario is a CPU-sized engine driving the first requests of the
// bundled Azure conversation trace at a high rate.
func tinyScenario(requests int) scenario.Scenario {
	sc := scenario.Default()
	sc.Name = "cpu-tiny"
	sc.Engine.NumGPUBlocks = 1024
	sc.Engine.MaxModelLen = 4096
	sc.Engine.CUDAGraphSizes = nil
	sc.Workload.Limit = requests
	sc.Workload.RateRPS = 50
	return sc
}

func plan(t *testing.T, sc scenario.Scenario) *scenario.Plan {
	t.Helper()
	p, err := sc.Plan()
	require.NoError(t, err)
	return p
}

func fakeWorker(mode string, steps int) WorkerOptions {
	return WorkerOptions{Python: python, Script: "testdata/fake_worker.py",
		Env: []string{"FAKE_WORKER_MODE=" + mode, "FAKE_WORKER_STEPS=" + strconv.Itoa(steps)}}
}

// TestCaptureWorkerFailures drives captures into workers that fail
// mid-run. Each failure must be named, carry the worker's last stderr
// lines, and leave a partial dataset whose completed parts validate.
func TestCaptureWorkerFailures(t *testing.T) {
	requirePython(t, "msgpack")
	const failAfter = 12
	tests := []struct {
		name        string
		mode        string
		stepTimeout time.Duration
		// wantErr are in the error message. The worker's last words are
		// checked only where it exits (or hangs): garbage arrives on
		// stdout while its stderr line may still be in the pipe.
		wantErr []string
	}{
		{"worker dies", "die", 0, []string{"fake-worker: simulated crash after 12 steps"}},
		{"worker hangs", "hang", time.Second, []string{"worker answered nothing for 1s (hung?)", "fake-worker: simulated hang after 12 steps"}},
		{"worker answers garbage", "garbage", 0, []string{"not a msgpack map"}},
		{"worker announces a huge frame", "huge", 0, []string{"frame of 4294967280 bytes: the stream is garbage"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "capture")
			opts := Options{Worker: fakeWorker(tc.mode, failAfter), Device: "cpu", CheckpointSteps: 4}
			opts.Worker.StepTimeout = tc.stepTimeout
			_, err := Capture(plan(t, tinyScenario(12)), dir, opts)
			require.Error(t, err)
			if tc.mode != "hang" {
				assert.NotContains(t, err.Error(), "hung?", "the failure was noticed by a timeout, not as it happened")
			}
			var we *WorkerError
			require.True(t, errors.As(err, &we), "not a WorkerError: %v", err)
			for _, s := range tc.wantErr {
				assert.Contains(t, err.Error(), s)
			}
			assert.Contains(t, we.Stderr, "fake-worker: answered 10 steps", "the last stderr lines")
			assert.Contains(t, err.Error(), "last stderr lines")

			m, merr := datasets.ReadManifest(dir)
			require.NoError(t, merr)
			assert.Equal(t, datasets.DatasetPartial, m.Status)
			assert.Contains(t, strings.Join(m.Notes, "\n"), "partial: ")
			steps := m.Tables[datasets.TableSteps]
			require.NotEmpty(t, steps.Parts, "completed parts kept")
			// Checkpoints every 4 steps; the worker answered 12.
			assert.GreaterOrEqual(t, steps.Rows, int64(8))
			assert.LessOrEqual(t, steps.Rows, int64(failAfter))
			assert.Equal(t, "capture", m.Source.Kind)

			rep, verr := validate.Dataset(dir, validate.Options{})
			require.NoError(t, verr)
			assert.True(t, rep.Partial)
			assertValid(t, rep)
			assert.Equal(t, steps.Rows, rep.RowsChecked[datasets.TableSteps])
		})
	}
}

// assertValid checks that validate found no error.
func assertValid(t *testing.T, rep *validate.Report) {
	t.Helper()
	for _, v := range rep.Violations {
		if v.Level == validate.Error {
			t.Errorf("validate: %v", v)
		}
	}
}

// TestCaptureFakeWorkerCompletes is the control for the failure tests:
// the same fake worker in mode ok gives a complete, valid dataset. In mode
// triton it reports the Triton attention's decode launch rule, which the
// manifest records; the torch attention (and mode ok) has none.
func TestCaptureFakeWorkerCompletes(t *testing.T) {
	requirePython(t, "msgpack")
	for _, tc := range []struct {
		mode string
		rule map[string]string
	}{
		{"ok", nil},
		{"triton", map[string]string{datasets.DetailDecodeKVTileTokens: "64", datasets.DetailDecodeSplitPrograms: "264",
			datasets.DetailDecodeSplitMax: "16", datasets.DetailDecodeSplitRounding: "pow2"}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "capture")
			res, err := Capture(plan(t, tinyScenario(6)), dir, Options{Worker: fakeWorker(tc.mode, 0), Device: "cpu", CheckpointSteps: 4})
			require.NoError(t, err)
			assert.EqualValues(t, 6, res.Finished)
			rep, err := validate.Dataset(dir, validate.Options{})
			require.NoError(t, err)
			assert.False(t, rep.Partial)
			assertValid(t, rep)
			m, err := datasets.ReadManifest(dir)
			require.NoError(t, err)
			assert.Equal(t, tc.rule, decodeRule(m), "the decode launch rule in source.detail")
		})
	}
}

// decodeRule is the decode attention's launch rule a manifest records
// (nil: none).
func decodeRule(m *datasets.Manifest) map[string]string {
	var out map[string]string
	for _, k := range []string{datasets.DetailDecodeKVTileTokens, datasets.DetailDecodeSplitPrograms,
		datasets.DetailDecodeSplitMax, datasets.DetailDecodeSplitRounding} {
		if v, ok := m.Source.Detail[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// TestCaptureRefusedInit: a worker that refuses the config (it does not
// fit) fails the capture before anything is measured, and no dataset
// directory is created: there is nothing partial to keep.
func TestCaptureRefusedInit(t *testing.T) {
	requirePython(t, "msgpack")
	dir := filepath.Join(t.TempDir(), "capture")
	_, err := Capture(plan(t, tinyScenario(4)), dir, Options{Worker: fakeWorker("refuse", 0), Device: "cpu"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "starting the worker")
	assert.Contains(t, err.Error(), "does not fit")
	assert.Contains(t, err.Error(), "use num_gpu_blocks <= 4711")
	var we *WorkerError
	require.True(t, errors.As(err, &we))
	assert.Contains(t, we.Stderr, "fake-worker: error: does not fit")
	_, statErr := os.Stat(dir)
	assert.True(t, os.IsNotExist(statErr), "a refused init leaves no dataset directory")
}

// A capture runs one engine on its worker: a cluster block is refused
// before any worker starts (none could: its interpreter does not exist)
// and no dataset directory is created.
func TestCaptureRefusesClusterBlock(t *testing.T) {
	sc := tinyScenario(4)
	require.NoError(t, sc.Set("cluster.pools={sim: {replicas: 2}}"))
	dir := filepath.Join(t.TempDir(), "capture")
	_, err := Capture(plan(t, sc), dir, Options{Worker: WorkerOptions{Python: "/nonexistent/python3"}, Device: "cpu"})
	require.ErrorContains(t, err, "a capture runs one engine on its GPU worker: remove the cluster block")
	_, statErr := os.Stat(dir)
	assert.True(t, os.IsNotExist(statErr), "nothing was measured")
}

// TestCPUCaptureTiny runs the real worker (capture/worker, PyTorch on the
// CPU, the tiny preset) end to end: a short trace and a small benchmark
// grid under the steady policy. CI installs python3-torch; there a
// missing torch fails the test.
func TestCPUCaptureTiny(t *testing.T) {
	requirePython(t, "msgpack", "torch")
	worker := WorkerOptions{Python: python, Script: "worker/worker.py", StartTimeout: patience, StepTimeout: patience}
	base := t.TempDir()

	t.Run("traffic", func(t *testing.T) {
		dir := filepath.Join(base, "traffic")
		res, err := Capture(plan(t, tinyScenario(12)), dir, Options{Worker: worker, Device: "cpu", Preset: "tiny", Seed: 3, CheckpointSteps: 32})
		require.NoError(t, err)
		assert.EqualValues(t, 12, res.Finished)
		m := checkCaptureDataset(t, dir)
		assert.Equal(t, datasets.PolicyProduction, m.MeasurementPolicy.Decode)

		d, err := datasets.Open(dir)
		require.NoError(t, err)
		steps, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
		require.NoError(t, err)
		require.NotEmpty(t, steps)
		for _, s := range steps {
			assert.Equal(t, datasets.RoleProduction, s.Role)
		}
		srs, err := datasets.ReadAll[datasets.StepRequest](d, datasets.TableStepRequests)
		require.NoError(t, err)
		checkNewRequestBytes(t, srs)
		reqs, err := datasets.ReadAll[datasets.Request](d, datasets.TableRequests)
		require.NoError(t, err)
		assert.Len(t, reqs, 12)
	})

	t.Run("bench steady", func(t *testing.T) {
		sc := tinyScenario(0)
		sc.Workload.Kind = "benchmark"
		sc.Workload.Benchmark = scenario.BenchmarkSpec{Mode: "agg", Policy: datasets.PolicySteadyStateSecondStep,
			DecodeBatchSizes: []int{1, 4}, DecodeContexts: []int{16, 64}, PrefillTokens: []int{32, 128}}
		dir := filepath.Join(base, "bench")
		_, err := Capture(plan(t, sc), dir, Options{Worker: worker, Device: "cpu", Preset: "tiny", CheckpointSteps: 16})
		require.NoError(t, err)
		m := checkCaptureDataset(t, dir)
		assert.Equal(t, datasets.PolicySteadyStateSecondStep, m.MeasurementPolicy.Decode)

		d, err := datasets.Open(dir)
		require.NoError(t, err)
		steps, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
		require.NoError(t, err)
		roles := map[string]int{}
		for _, s := range steps {
			roles[s.Role]++
			if s.Role == datasets.RoleMeasured && s.Kind == datasets.KindDecode {
				// The steady policy measures the request's second step:
				// nothing is admitted in it.
				assert.Zero(t, s.NumNewReqs, "steady decode step %d ships new requests", s.StepID)
				assert.GreaterOrEqual(t, s.BenchmarkID, int64(0))
			}
		}
		assert.Positive(t, roles[datasets.RoleMeasured], "measured rows")
		assert.Positive(t, roles[datasets.RoleScaffolding], "admission rows kept as scaffolding")
	})

	// The catalogue's tiny shape sent explicitly (no preset), on a grid
	// with ragged and mixed points: the steady mixed point's chunk arrives
	// once the decodes' admission step is scheduled, on the wall clock.
	t.Run("bench hetero explicit shape", func(t *testing.T) {
		sc := tinyScenario(0)
		sc.Model = "tiny"
		sc.Workload.Kind = "benchmark"
		sc.Workload.Benchmark = scenario.BenchmarkSpec{Mode: "agg", Policy: datasets.PolicySteadyStateSecondStep,
			DecodeBatchSizes: []int{2}, DecodeContexts: []int{16}, PrefillTokens: []int{32},
			RaggedBatchSizes: []int{6}, RaggedContexts: []int{40}, RaggedSpreads: []scenario.SpreadSpec{{Shape: "tail", MaxRatio: 3}},
			MixedPrefillTokens: []int{24}, MixedPrefillContexts: []int{0, 50}, MixedDecodeBatchSizes: []int{3}, MixedDecodeContexts: []int{30}}
		dir := filepath.Join(base, "hetero")
		_, err := Capture(plan(t, sc), dir, Options{Worker: worker, Device: "cpu", CheckpointSteps: 16})
		require.NoError(t, err)
		m := checkCaptureDataset(t, dir)
		assert.True(t, m.Model.TiedEmbeddings)
		d, err := datasets.Open(dir)
		require.NoError(t, err)
		steps, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
		require.NoError(t, err)
		var ragged, mixed int
		for _, s := range steps {
			if s.Role != datasets.RoleMeasured {
				continue
			}
			switch {
			case strings.Contains(s.SampleReason, "ragged_context"):
				ragged++
				assert.Equal(t, int64(120), s.MaxDecodeKVTokens, "one request at 3 × 40")
				assert.Equal(t, int64(240), s.SumDecodeKVTokens)
			case strings.Contains(s.SampleReason, "mixed_step"):
				mixed++
				assert.Equal(t, datasets.KindMixed, s.Kind)
				assert.Equal(t, int32(3), s.NumDecodeRequests)
				assert.Equal(t, int32(1), s.NumNewReqs, "only the chunk is admitted in the measured step")
				assert.Equal(t, int64(24), s.SumPrefillTokens)
				assert.Equal(t, int32(0), s.CUDAGraphSize, "eager")
			}
		}
		assert.Equal(t, 1, ragged)
		assert.Equal(t, 2, mixed)
	})
}

// TestCPUCaptureTinyMoE runs the worker's mixture-of-experts path on the
// CPU: a Qwen3-MoE-shaped config.json (8 experts, top 2) through the
// scheduler, its shape and routing recorded in the manifest.
func TestCPUCaptureTinyMoE(t *testing.T) {
	requirePython(t, "msgpack", "torch")
	worker := WorkerOptions{Python: python, Script: "worker/worker.py", StartTimeout: patience, StepTimeout: patience}
	sc := tinyScenario(0)
	sc.Model = filepath.Join("testdata", "tiny-moe", "config.json")
	sc.Workload.Kind = "benchmark"
	sc.Workload.Benchmark = scenario.BenchmarkSpec{Mode: "agg", Policy: datasets.PolicySteadyStateSecondStep,
		DecodeBatchSizes: []int{1, 3}, DecodeContexts: []int{16}, PrefillTokens: []int{32}}
	dir := filepath.Join(t.TempDir(), "moe")
	_, err := Capture(plan(t, sc), dir, Options{Worker: worker, Device: "cpu", CheckpointSteps: 16})
	require.NoError(t, err)
	m, err := datasets.ReadManifest(dir)
	require.NoError(t, err)
	require.NotNil(t, m.Model.MoE)
	// The routing is recorded (no tilt, on the random router's logit
	// spread 0.02·√64) for the fit's experts-reached term.
	noSkew := 0.0
	assert.Equal(t, datasets.ModelMoE{Experts: 8, TopK: 2, ExpertIntermediate: 32, RoutingSkew: &noSkew, RouterLogitStd: 0.16}, *m.Model.MoE)
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	steps, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
	require.NoError(t, err)
	measured := 0
	for _, s := range steps {
		if s.Role == datasets.RoleMeasured {
			measured++
			assert.Positive(t, s.GPUTimeNs)
		}
	}
	assert.Equal(t, 5, measured, "two decode points and the prefill point at 1, 2 and 4 requests")
}

func TestWorkerShapeRefusesByField(t *testing.T) {
	tests := []struct{ name, field string }{
		{"DeepSeek-V3", "mla.kv_lora_rank"},
		{"gemma-2-9b-it", "sliding_layers"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := catalog.LookupModel(tc.name)
			require.NoError(t, err)
			_, err = WorkerShape(s)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.field+" is set")
		})
	}
	s, err := catalog.LookupModel("Qwen3-30B-A3B")
	require.NoError(t, err)
	mc, err := WorkerShape(s)
	require.NoError(t, err)
	assert.Equal(t, [3]int{128, 8, 768}, [3]int{mc.Experts, mc.TopK, mc.ExpertIntermediate})
}

// checkCaptureDataset validates a finished CPU capture and the fields
// every captured step must have; it returns the manifest.
func checkCaptureDataset(t *testing.T, dir string) *datasets.Manifest {
	t.Helper()
	rep, err := validate.Dataset(dir, validate.Options{})
	require.NoError(t, err)
	assertValid(t, rep)
	assert.False(t, rep.Partial)

	m, err := datasets.ReadManifest(dir)
	require.NoError(t, err)
	assert.Equal(t, datasets.DatasetComplete, m.Status)
	assert.Equal(t, "capture", m.Source.Kind)
	assert.Equal(t, "gpu-worker", m.Source.Format)
	assert.Equal(t, "cpu", m.Source.Detail["device"])
	assert.NotEmpty(t, m.Source.Detail["torch"], "worker's torch version")
	assert.Equal(t, "torch", m.Source.Detail["attention_backend"])
	assert.Nil(t, decodeRule(m), "the CPU runs the torch attention: no split-KV launch rule")
	assert.NotEqual(t, "0", m.Source.Detail["kv_bytes"])
	require.NotNil(t, m.Model)
	assert.Equal(t, "tiny", m.Model.Name)
	assert.Equal(t, 2, m.Model.Layers)
	assert.Equal(t, 64, m.Model.Hidden)
	require.NotNil(t, m.Engine)
	assert.Equal(t, 1024, m.Engine.NumGPUBlocks)

	d, err := datasets.Open(dir)
	require.NoError(t, err)
	steps, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
	require.NoError(t, err)
	require.NotEmpty(t, steps)
	prevUpdateEnd := int64(-1)
	for _, s := range steps {
		// wall_time_ns (Dynamo's FPM definition): the inter-update period,
		// or the narrow window for the first step after idle.
		interUpdate := s.TOutput - prevUpdateEnd
		switch {
		case prevUpdateEnd < 0:
			assert.Equal(t, s.NarrowTimeNs, s.WallTimeNs, "step %d: the first step", s.StepID)
		case s.Overlapped:
			assert.Equal(t, interUpdate, s.WallTimeNs, "step %d: overlapped", s.StepID)
		default:
			assert.Contains(t, []int64{s.NarrowTimeNs, interUpdate}, s.WallTimeNs, "step %d", s.StepID)
		}
		prevUpdateEnd = s.TUpdateEnd
		// Real frame sizes: the step's whole frame holds both request lists.
		assert.Positive(t, s.PayloadBytes, "step %d", s.StepID)
		assert.GreaterOrEqual(t, s.PayloadBytes, s.PayloadNewBytes+s.PayloadCachedBytes, "step %d", s.StepID)
		if s.NumNewReqs == 0 {
			assert.LessOrEqual(t, s.PayloadNewBytes, int64(1), "step %d: no new request, an empty list", s.StepID)
		}
		// One monotonic clock, in order.
		ts := []int64{s.TScheduleStart, s.TScheduleEnd, s.TDispatch, s.TOutput, s.TUpdateEnd}
		assert.True(t, sort.SliceIsSorted(ts, func(i, j int) bool { return ts[i] < ts[j] }), "step %d: timings out of order: %v", s.StepID, ts)
		assert.GreaterOrEqual(t, s.TScheduleStart, int64(0))
		assert.Equal(t, s.TOutput-s.TScheduleStart, s.NarrowTimeNs, "step %d", s.StepID)
		assert.Positive(t, s.WallTimeNs, "step %d", s.StepID)
		assert.Positive(t, s.GPUTimeNs, "step %d: device time of the forward pass", s.StepID)
		assert.GreaterOrEqual(t, s.HostPrepNs, int64(0), "step %d", s.StepID)
	}
	return m
}

// checkNewRequestBytes: a new request ships its full prompt, so its bytes
// grow with the prompt: at least one byte per token id (msgpack
// positive fixint, at most 5 for an int32).
func checkNewRequestBytes(t *testing.T, srs []datasets.StepRequest) {
	t.Helper()
	var fresh []datasets.StepRequest
	for _, r := range srs {
		if r.IsNew {
			fresh = append(fresh, r)
		}
	}
	require.GreaterOrEqual(t, len(fresh), 2)
	for _, r := range fresh {
		assert.GreaterOrEqual(t, r.PayloadBytes, r.PromptLen, "request %s", r.ReqID)
		assert.LessOrEqual(t, r.PayloadBytes, 5*r.PromptLen+512, "request %s", r.ReqID)
	}
	sort.Slice(fresh, func(i, j int) bool { return fresh[i].PromptLen < fresh[j].PromptLen })
	short, long := fresh[0], fresh[len(fresh)-1]
	require.Greater(t, long.PromptLen, 2*short.PromptLen+64, "the trace should mix prompt lengths")
	assert.Greater(t, long.PayloadBytes, short.PayloadBytes, "bytes scale with prompt length")
}
