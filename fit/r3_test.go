package fit

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
)

// R3 (docs/architecture.md#r3-admission-step-contamination) end to end, on simulated data: decode benchmark grids
// measured under the admission_step and the steady_state_second_step
// policies, a held-out production trace (Poisson arrivals through the same
// simulated engine), the same linear decode form fitted on each grid
// (DecodeTerms: const, decode_requests, decode_kv_tokens; target
// wall_time_ns, what a benchmark records), evaluated on the production
// trace's decode steps' wall_time_ns.
//
// Model and hardware: Qwen2.5-7B (4 KV heads) on one H200 with the
// simulator's default host model. How much the admission step inflates the
// KV-token cost depends on the device's per-KV-token cost against the
// host's per-prompt-token admission cost (pickling and shipping the prompt,
// copying it into the persistent batch: ≈ 27 ns per token with the default
// HostModel). On Qwen2.5-7B the steady decode reads ≈ 13 ns per KV token
// and the admission fit lands at ≈ 41 (3.1×); on Llama-3.1-8B (twice the
// KV bytes per token) ≈ 30 against ≈ 58, only 1.9× — TestR3LlamaKVRatio
// states that number too. The published H100 analysis's 6.03 vs 1.2 ns/token (5×) was
// a TP=4 MoE model on B200s, whose per-token device cost is lower still.
func TestR3AdmissionGridBiasesTheModel(t *testing.T) {
	const mdl = "Qwen2.5-7B"
	dir := t.TempDir()
	batches := []int{1, 2, 4, 8, 16, 32, 64, 128, 256}
	contexts := []int{256, 512, 1024, 2048, 4096}
	prod := simulateTo(t, filepath.Join(dir, "prod-heldout"), productionScenario(mdl, 7))
	trainProd := simulateTo(t, filepath.Join(dir, "prod-train"), productionScenario(mdl, 8))
	admDir := simulateTo(t, filepath.Join(dir, "grid-admission"), gridScenario(mdl, datasets.PolicyAdmissionStep, batches, contexts))
	stdDir := simulateTo(t, filepath.Join(dir, "grid-steady"), gridScenario(mdl, datasets.PolicySteadyStateSecondStep, batches, contexts))

	decode := LoadOptions{Selection: Selection{Kinds: []string{datasets.KindDecode}}, Target: TargetWall, BenchmarkCoords: true}
	held := loadData(t, prod, decode)
	adm := mustLoad(t, admDir, withSteps(decode))
	std := mustLoad(t, stdDir, decode)
	require.Len(t, adm.Warnings, 1, "the admission grid is flagged")
	require.Contains(t, adm.Warnings[0], "admission_step")
	require.Empty(t, std.Warnings)
	require.Equal(t, len(batches)*len(contexts), adm.Data.Len())
	// Every admission point is a decode row at its benchmark coordinate
	// (the simulator records it so, as Dynamo's artifact does; on data
	// that classifies the admission step as prefill, BenchmarkCoords
	// re-reads it), and its columns still show that it admitted the batch.
	for i := range adm.Steps {
		s := &adm.Steps[i]
		require.Equal(t, datasets.KindDecode, s.Kind)
		require.Equal(t, s.NumDecodeRequests, s.NumNewReqs, "the measured step admitted its B requests")
	}
	require.Equal(t, len(batches)*len(contexts), std.Data.Len())
	t.Logf("held-out production: %d decode steps; grids: %d points each (B %v × ctx %v)", held.Len(), adm.Data.Len(), batches, contexts)

	fitOpt := Options{Terms: DecodeTerms, Bootstrap: 200, Seed: 1}
	ra, err := Linear(adm.Data, fitOpt)
	require.NoError(t, err)
	rs, err := Linear(std.Data, fitOpt)
	require.NoError(t, err)
	kv := func(r *Result) (v, lo, hi float64) {
		i := indexOf(r.Model.Terms, fpm.TermDecodeKVTokens)
		return r.Model.Coef[i], r.Model.CoefLo[i], r.Model.CoefHi[i]
	}
	ka, kaLo, kaHi := kv(ra)
	ks, ksLo, ksHi := kv(rs)
	ea, es := Evaluate(ra.Model, held, 0), Evaluate(rs.Model, held, 0)
	t.Logf("admission fit: %s", coefString(ra.Model))
	t.Logf("steady fit:    %s", coefString(rs.Model))
	t.Logf("decode_kv_tokens: admission %.2f ns/token [%.2f, %.2f], steady %.2f [%.2f, %.2f]: ratio %.2fx",
		ka, kaLo, kaHi, ks, ksLo, ksHi, ka/ks)
	t.Logf("held-out production decode wall time: admission model MAPE %.1f%% (bias %+.1f%%, p90 %.1f%%), steady model MAPE %.2f%% (bias %+.2f%%, p90 %.2f%%)",
		ea.Overall.MAPE, ea.Overall.MeanBias, ea.Overall.P90APE, es.Overall.MAPE, es.Overall.MeanBias, es.Overall.P90APE)
	require.GreaterOrEqual(t, ka/ks, 2.0, "the admission KV-token cost is several times the steady one")
	require.Greater(t, kaLo, ksHi, "and their 95% intervals do not overlap")
	require.Greater(t, ea.Overall.MAPE, es.Overall.MAPE, "the admission model predicts production worse")
	require.Greater(t, ea.Overall.MAPE, 10*es.Overall.MAPE, "by an order of magnitude")
	require.Greater(t, ea.Overall.MeanBias, 50.0, "it over-predicts production decode")
	require.Less(t, es.Overall.MAPE, 5.0, "the steady model predicts production within 5%")

	// More points. Denser grids on their own do not move a linear fit:
	// the bias is in the y-values, not the point distribution, so the
	// admission-only model stays wrong by the same amount however many
	// points it has (checked: never below 100% MAPE). The published measurement's "more
	// benchmark points degrade real-traffic prediction" shows when the
	// benchmark points join other data: here a sample of production decode
	// steps from another trace (every 10th, ~340 rows). Each denser
	// admission grid pulls the joint fit further off; denser steady grids
	// leave it where it was.
	trainAll := loadData(t, trainProd, decode)
	var every10 []int
	for i := 0; i < trainAll.Len(); i += 10 {
		every10 = append(every10, i)
	}
	base := trainAll.Subset(every10)
	rb, err := Linear(base, Options{Terms: DecodeTerms})
	require.NoError(t, err)
	baseMAPE := Evaluate(rb.Model, held, 0).Overall.MAPE
	t.Logf("base: %d production decode steps of another trace alone: held-out MAPE %.2f%%", base.Len(), baseMAPE)
	densities := []struct{ B, C []int }{
		{[]int{1, 4, 16, 64, 256}, []int{256, 1024, 4096}},
		{batches, contexts},
		{[]int{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256}, []int{256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096}},
	}
	joint := map[string][]float64{}
	for _, pol := range []string{datasets.PolicyAdmissionStep, datasets.PolicySteadyStateSecondStep} {
		for k, g := range densities {
			gd := mustLoad(t, simulateTo(t, filepath.Join(dir, fmt.Sprintf("%s-%d", pol, k)), gridScenario(mdl, pol, g.B, g.C)), decode).Data
			alone, err := Linear(gd, Options{Terms: DecodeTerms})
			require.NoError(t, err)
			mAlone := Evaluate(alone.Model, held, 0).Overall.MAPE
			both, err := Linear(concatData(base, gd), Options{Terms: DecodeTerms})
			require.NoError(t, err)
			mBoth := Evaluate(both.Model, held, 0).Overall.MAPE
			joint[pol] = append(joint[pol], mBoth)
			t.Logf("%-24s %3d points: grid alone MAPE %6.1f%% (kv %.1f ns/token); base + grid MAPE %5.2f%% (kv %.1f ns/token)",
				pol, gd.Len(), mAlone, alone.Model.Coef[2], mBoth, both.Model.Coef[2])
			if pol == datasets.PolicyAdmissionStep {
				require.Greater(t, mAlone, 100.0, "an admission grid alone stays >100%% off at any density")
			} else {
				require.Less(t, mAlone, 5.0)
			}
		}
	}
	a, s := joint[datasets.PolicyAdmissionStep], joint[datasets.PolicySteadyStateSecondStep]
	require.Greater(t, a[0], baseMAPE, "admission points make the joint model worse than the base")
	for k := 1; k < len(a); k++ {
		require.Greater(t, a[k], a[k-1], "each denser admission grid makes the held-out error worse")
	}
	require.Greater(t, a[len(a)-1], 3*a[0], "the densest admission grid at least triples the error of the sparsest")
	for k := range s {
		require.InDelta(t, baseMAPE, s[k], 1.0, "steady points leave the held-out error within 1 percentage point of the base")
	}
}

// TestR3LlamaKVRatio states what the default scenario (Llama-3.1-8B on an
// H200) gives: the inflation is there, but the KV-token ratio is just under
// 2× because its steady per-KV-token device cost (≈ 30 ns) is larger
// against the host's ≈ 27 ns per admitted prompt token.
func TestR3LlamaKVRatio(t *testing.T) {
	const mdl = "Llama-3.1-8B"
	dir := t.TempDir()
	b := []int{1, 4, 16, 64, 256}
	c := []int{256, 1024, 4096}
	decode := LoadOptions{Selection: Selection{Kinds: []string{datasets.KindDecode}}, Target: TargetWall, BenchmarkCoords: true}
	adm := mustLoad(t, simulateTo(t, filepath.Join(dir, "a"), gridScenario(mdl, datasets.PolicyAdmissionStep, b, c)), decode)
	std := mustLoad(t, simulateTo(t, filepath.Join(dir, "s"), gridScenario(mdl, datasets.PolicySteadyStateSecondStep, b, c)), decode)
	ra, err := Linear(adm.Data, Options{Terms: DecodeTerms})
	require.NoError(t, err)
	rs, err := Linear(std.Data, Options{Terms: DecodeTerms})
	require.NoError(t, err)
	ratio := ra.Model.Coef[2] / rs.Model.Coef[2]
	t.Logf("Llama-3.1-8B/H200: decode_kv_tokens admission %.2f vs steady %.2f ns/token: %.2fx", ra.Model.Coef[2], rs.Model.Coef[2], ratio)
	require.Greater(t, ratio, 1.5)
}

func gridScenario(mdl, policy string, batches, contexts []int) scenario.Scenario {
	sc := scenario.Default()
	sc.Model = mdl
	sc.Engine.MaxNumSeqs = 1024
	sc.Engine.MaxNumBatchedTokens = 16384
	sc.Engine.NumGPUBlocks = 200_000
	sc.Workload = scenario.WorkloadSpec{Kind: "benchmark", Benchmark: scenario.BenchmarkSpec{
		Mode: "decode", Policy: policy, DecodeBatchSizes: batches, DecodeContexts: contexts, Warmups: new(int)}}
	return sc
}

// productionScenario is 3,000 Poisson requests at 30 req/s with lognormal
// prompts (mean 1,500) and outputs (mean 300) on the default engine.
func productionScenario(mdl string, seed uint64) scenario.Scenario {
	sc := scenario.Default()
	sc.Model = mdl
	sc.Seed = seed
	sc.Workload = scenario.WorkloadSpec{Kind: "poisson", RateRPS: 30, Requests: 3000,
		Prompt: scenario.LengthSpec{Kind: "lognormal", Mean: 1500, Sigma: 0.8, Min: 32, Max: 8000},
		Output: scenario.LengthSpec{Kind: "lognormal", Mean: 300, Sigma: 0.8, Min: 8, Max: 2000}}
	return sc
}

func simulateTo(t *testing.T, dir string, sc scenario.Scenario) string {
	t.Helper()
	p, err := sc.Plan()
	require.NoError(t, err)
	_, err = scenario.Run(p, dir, sim.RunOptions{Command: []string{"r3_test"}})
	require.NoError(t, err)
	return dir
}

func mustLoad(t *testing.T, dir string, opt LoadOptions) *Loaded {
	t.Helper()
	l, err := LoadDatasets([]string{dir}, opt)
	require.NoError(t, err)
	return l
}

func loadData(t *testing.T, dir string, opt LoadOptions) *Data { return mustLoad(t, dir, opt).Data }

func concatData(a, b *Data) *Data {
	out := a.Subset(seq(a.Len()))
	out.Features = append(out.Features, b.Features...)
	out.Y = append(out.Y, b.Y...)
	out.StepIDs = append(out.StepIDs, b.StepIDs...)
	out.Kinds = append(out.Kinds, b.Kinds...)
	return out
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func coefString(m *fpm.Linear) string {
	var parts []string
	for i, term := range m.Terms {
		parts = append(parts, fmt.Sprintf("%s=%.4g", term, m.Coef[i]))
	}
	return strings.Join(parts, " ")
}

func withSteps(opt LoadOptions) LoadOptions { opt.KeepSteps = true; return opt }
