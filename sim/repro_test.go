package sim_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
)

// benchScenario is a self-benchmark on Llama-3.1-8B / H200 with the given
// decode grid. NumGPUBlocks is set explicitly so that B=513 at ~4K context
// fits, as the 4×B200 deployment of the published self-benchmark measurement did.
func benchScenario(policy string, batches, contexts []int) scenario.Scenario {
	sc := scenario.Default()
	sc.Engine.MaxNumSeqs = 1024
	sc.Engine.MaxNumBatchedTokens = 16384
	sc.Engine.NumGPUBlocks = 200_000
	sc.Workload = scenario.WorkloadSpec{Kind: "benchmark", Benchmark: scenario.BenchmarkSpec{
		Mode: "decode", Policy: policy, DecodeBatchSizes: batches, DecodeContexts: contexts, Warmups: new(int)}}
	return sc
}

// runSteps simulates sc and returns its steps.
func runSteps(t *testing.T, sc scenario.Scenario) []datasets.Step {
	t.Helper()
	p, err := sc.Plan()
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "ds")
	_, err = scenario.Run(p, dir, sim.RunOptions{Command: []string{"test"}})
	require.NoError(t, err)
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	steps, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
	require.NoError(t, err)
	return steps
}

// byBenchmark indexes steps by (benchmark id, role).
func byBenchmark(steps []datasets.Step) map[string]datasets.Step {
	m := map[string]datasets.Step{}
	for _, s := range steps {
		if s.SampleReason == "eager_warmup" {
			continue
		}
		m[fmt.Sprintf("%d/%s", s.BenchmarkID, s.Role)] = s
	}
	return m
}

// R1 (docs/architecture.md#r1-payload): at B=513 with ~4K-token contexts an admission step
// ships megabytes through scheduled_new_reqs while the steady step that
// follows ships kilobytes of deltas: about four orders of magnitude.
func TestR1PayloadAdmissionVsSteady(t *testing.T) {
	steps := runSteps(t, benchScenario(datasets.PolicySteadyStateSecondStep, []int{513}, []int{4100}))
	m := byBenchmark(steps)
	adm, ok := m["1/scaffolding"]
	require.True(t, ok, "admission step of point 1")
	steady, ok := m["1/measured"]
	require.True(t, ok, "steady step of point 1")
	require.EqualValues(t, 513, adm.NumNewReqs)
	require.EqualValues(t, 513, steady.NumCachedReqs)
	require.EqualValues(t, 0, steady.NumNewReqs)
	t.Logf("B=513 ctx≈4100: admission %d B, steady %d B, ratio %.0f", adm.PayloadBytes, steady.PayloadBytes,
		float64(adm.PayloadBytes)/float64(steady.PayloadBytes))
	require.InDelta(t, 8.5e6, float64(adm.PayloadBytes), 0.1*8.5e6, "admission ≈ 8.5 MB")
	require.InDelta(t, 6.8e3, float64(steady.PayloadBytes), 0.15*6.8e3, "steady ≈ 6.8 KB")
	require.Greater(t, float64(adm.PayloadBytes)/float64(steady.PayloadBytes), 1000.0)
}

// R2: under async scheduling the steady step of a B=1 point is scheduled
// while the admission step still runs, so its narrow schedule→output window
// counts both steps (published measurement: 11.29 ≈ 6.74 + 4.83 ms) while its inter-update
// period is its own step (4.71 vs 4.83 ms real).
func TestR2AsyncTimingWindows(t *testing.T) {
	steps := runSteps(t, benchScenario(datasets.PolicySteadyStateSecondStep, []int{1}, []int{1024}))
	m := byBenchmark(steps)
	adm, steady := m["1/scaffolding"], m["1/measured"]
	require.True(t, steady.Overlapped, "the steady step is scheduled while the admission step runs")
	require.False(t, adm.Overlapped)
	// What the steady step really costs: its own span from the admission
	// output to its output (device plus the host work not hidden).
	own := steady.TOutput - adm.TOutput
	admRemaining := adm.TOutput - steady.TScheduleStart
	t.Logf("narrow %.3f ms = admission remaining %.3f + own %.3f; inter-update %.3f ms; gpu %.3f ms",
		ms(steady.NarrowTimeNs), ms(admRemaining), ms(own), ms(steady.WallTimeNs), ms(steady.GPUTimeNs))
	require.Equal(t, admRemaining+own, steady.NarrowTimeNs, "narrow = remaining admission + own step")
	require.Greater(t, float64(admRemaining), 0.5*float64(own), "the narrow window carries a large share of the admission step")
	require.InEpsilon(t, float64(own), float64(steady.WallTimeNs), 0.1, "inter-update period ≈ own step")
	require.Greater(t, float64(steady.NarrowTimeNs), 1.5*float64(steady.WallTimeNs))
}

// R3: decode points measured on the admission step are inflated against
// steady-state ones, increasingly with B.
func TestR3AdmissionInflationGrowsWithB(t *testing.T) {
	batches := []int{1, 16, 64, 256}
	adm := byBenchmark(runSteps(t, benchScenario(datasets.PolicyAdmissionStep, batches, []int{2048})))
	std := byBenchmark(runSteps(t, benchScenario(datasets.PolicySteadyStateSecondStep, batches, []int{2048})))
	prev := 0.0
	for i, b := range batches {
		a, s := adm[fmt.Sprintf("%d/measured", i+1)], std[fmt.Sprintf("%d/measured", i+1)]
		require.EqualValues(t, b, a.NumDecodeRequests+a.NumPrefillRequests, "admission point %d", b)
		require.EqualValues(t, b, s.NumDecodeRequests, "steady point %d", b)
		ratio := float64(a.WallTimeNs) / float64(s.WallTimeNs)
		t.Logf("B=%d: admission %.2f ms, steady %.2f ms, inflation %.2fx", b, ms(a.WallTimeNs), ms(s.WallTimeNs), ratio)
		require.Greater(t, ratio, 1.0, "B=%d", b)
		require.Greater(t, ratio, prev, "inflation grows with B (B=%d)", b)
		prev = ratio
	}
	require.Greater(t, prev, 2.0, "at B=256 the admission row is inflated more than 2x")
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// minimaxSeed is the published self-benchmark measurement's run: the
// MiniMax-M2.7 NVFP4 checkpoint on four B200s (TP 4), priced by the
// roofline prior and the default host model, with no constant set to its
// figures.
func minimaxSeed(policy string, batches, contexts []int) scenario.Scenario {
	sc := benchScenario(policy, batches, contexts)
	sc.Hardware, sc.TensorParallel = "B200", 4
	sc.Model = "../catalog/testdata/aiconfigurator/nvidia--MiniMax-M2.7-NVFP4_config.json"
	sc.Engine.NumGPUBlocks = 0 // sized from B200 memory
	return sc
}

// The seed's figures (docs/architecture.md#the-seeds-run-simulated):
// steady decode at B=1 and B=256, the admission step at B=256 and the
// admission payload at B=513, simulated on the seed's model and machine.
// The payload is the payload model's (R1); the step times are the
// roofline's and the host model's: the test holds their order, not their
// size (the next issue fits them).
func TestMiniMaxSeedRun(t *testing.T) {
	const ctx = 1024
	steady := byBenchmark(runSteps(t, minimaxSeed(datasets.PolicySteadyStateSecondStep, []int{1, 256}, []int{ctx})))
	adm := byBenchmark(runSteps(t, minimaxSeed(datasets.PolicyAdmissionStep, []int{256}, []int{ctx})))
	pay := byBenchmark(runSteps(t, minimaxSeed(datasets.PolicySteadyStateSecondStep, []int{513}, []int{4100})))
	b1, b256, a256 := steady["1/measured"], steady["2/measured"], adm["1/measured"]
	p513 := pay["1/scaffolding"]
	require.EqualValues(t, 1, b1.NumDecodeRequests)
	require.EqualValues(t, 256, b256.NumDecodeRequests)
	require.EqualValues(t, 256, a256.NumNewReqs)
	require.EqualValues(t, 513, p513.NumNewReqs)
	t.Logf("MiniMax-M2.7-NVFP4, 4×B200 (TP4), roofline, ctx %d (seed's figures in brackets):", ctx)
	t.Logf("  steady decode B=1:   step %.2f ms (GPU %.2f ms) [4.83 ms]", ms(b1.WallTimeNs), ms(b1.GPUTimeNs))
	t.Logf("  steady decode B=256: step %.2f ms (GPU %.2f ms) [25.36 ms]", ms(b256.WallTimeNs), ms(b256.GPUTimeNs))
	t.Logf("  admission step B=256: %.2f ms (GPU %.2f ms) [171.62 ms]", ms(a256.WallTimeNs), ms(a256.GPUTimeNs))
	t.Logf("  admission payload B=513, ctx 4100: %.2f MB [8.5 MB]", float64(p513.PayloadBytes)/1e6)
	require.Greater(t, b256.WallTimeNs, b1.WallTimeNs)
	require.Greater(t, a256.WallTimeNs, b256.WallTimeNs, "the admission step is inflated")
	require.InDelta(t, 8.5e6, float64(p513.PayloadBytes), 0.1*8.5e6, "R1's payload: prompts shipped whole")
}
