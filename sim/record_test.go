package sim_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/features"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
)

// recordingFPM keeps the features of every step it prices, in step order.
type recordingFPM struct {
	fpm.FPM
	seen []fpm.Features
}

func (r *recordingFPM) PredictNs(f fpm.Features) float64 {
	r.seen = append(r.seen, f)
	return r.FPM.PredictNs(f)
}

// The features the simulator prices are the features a reader maps from
// the written steps row (features.Of), and from the row with its feature
// columns erased and completed from step_requests: one definition, exact
// both ways. The only rows that differ are benchmark admission steps,
// priced as the prefill the scheduler ran and recorded as the decode (or
// mixed) point they measure.
func TestRecordedFeaturesRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*scenario.Scenario)
	}{
		{"trace", func(sc *scenario.Scenario) { sc.Workload.Limit = 300 }},
		{"preempting", func(sc *scenario.Scenario) {
			sc.Workload = scenario.WorkloadSpec{Kind: "poisson", RateRPS: 40, Requests: 300,
				Prompt: scenario.LengthSpec{Kind: "lognormal", Mean: 1500, Sigma: 0.8, Max: 8000},
				Output: scenario.LengthSpec{Kind: "lognormal", Mean: 300, Sigma: 0.7, Max: 2000}}
			sc.Engine.NumGPUBlocks, sc.Engine.MaxModelLen = 1500, 16384
		}},
		{"eager", func(sc *scenario.Scenario) {
			sc.Workload.Limit = 200
			sc.Engine.CUDAGraphSizes, sc.Engine.MaxNumBatchedTokens = nil, 1024
		}},
		{"grid", func(sc *scenario.Scenario) {
			sc.Engine.NumGPUBlocks, sc.Workload = 20000, heteroWorkload(datasets.PolicySteadyStateSecondStep)
		}},
		{"grid-admission", func(sc *scenario.Scenario) {
			sc.Engine.NumGPUBlocks, sc.Workload = 20000, heteroWorkload(datasets.PolicyAdmissionStep)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc := scenario.Default()
			c.mod(&sc)
			p, err := sc.Plan()
			require.NoError(t, err)
			rec := &recordingFPM{FPM: p.Engine().FPM}
			p.Engine().FPM = rec
			dir := filepath.Join(t.TempDir(), "ds")
			_, err = scenario.Run(p, dir, sim.RunOptions{})
			require.NoError(t, err)
			d, err := datasets.Open(dir)
			require.NoError(t, err)
			steps, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
			require.NoError(t, err)
			require.Len(t, rec.seen, len(steps))

			erased := make([]datasets.Step, len(steps))
			for i, st := range steps {
				st.MaxDecodeKVTokens, st.SumPrefillAttn, st.NewReqTokens = datasets.Unknown, float64(datasets.Unknown), datasets.Unknown
				erased[i] = st
			}
			n, matched, err := features.CompleteSteps(d, erased)
			require.NoError(t, err)
			require.True(t, matched)
			require.Equal(t, len(steps), n)

			relabelled := 0
			for i := range steps {
				st := &steps[i]
				if rec.seen[i].Kind() != st.Kind {
					require.Equal(t, datasets.KindPrefill, rec.seen[i].Kind(), "step %d", st.StepID)
					require.Equal(t, st.NumNewReqs, st.NumDecodeRequests+st.NumPrefillRequests, "step %d: an admission step", st.StepID)
					relabelled++
					continue
				}
				require.Equal(t, rec.seen[i], features.Of(st), "step %d", st.StepID)
				require.Equal(t, rec.seen[i], features.Of(&erased[i]), "step %d from step_requests", st.StepID)
			}
			if sc.Workload.Kind != "benchmark" {
				require.Zero(t, relabelled)
			}
			if c.name == "preempting" {
				var resumed int32
				for i := range steps {
					resumed += steps[i].NumResumedReqs
				}
				require.Positive(t, resumed, "the scenario should resume preempted requests")
			}
		})
	}
}

// heteroWorkload is a small grid with every kind of point: uniform decode,
// prefill, ragged decode, mixed and a prefill chunk at a context.
func heteroWorkload(policy string) scenario.WorkloadSpec {
	return scenario.WorkloadSpec{Kind: "benchmark", Benchmark: scenario.BenchmarkSpec{Mode: "agg", Policy: policy,
		DecodeBatchSizes: []int{1, 7, 32}, DecodeContexts: []int{64, 1000}, PrefillTokens: []int{300, 2000},
		RaggedBatchSizes: []int{5, 40}, RaggedContexts: []int{800}, RaggedSpreads: []scenario.SpreadSpec{{Shape: "ramp", MaxRatio: 1.8}, {Shape: "tail", MaxRatio: 4}},
		MixedPrefillTokens: []int{700}, MixedPrefillContexts: []int{0, 3000}, MixedDecodeBatchSizes: []int{0, 24}, MixedDecodeContexts: []int{1500}}}
}

// The extended grid writes its new rows under both policies: ragged
// decode points measured at their spread (the longest context recorded),
// mixed points as mixed steps whose decodes are cached under the steady
// policy and admitted with the chunk under admission_step, and a prefill
// chunk at a context with its attention pairs.
func TestBenchmarkHeteroRows(t *testing.T) {
	for _, policy := range []string{datasets.PolicySteadyStateSecondStep, datasets.PolicyAdmissionStep} {
		t.Run(policy, func(t *testing.T) {
			sc := scenario.Default()
			sc.Engine.NumGPUBlocks, sc.Workload = 20000, heteroWorkload(policy)
			var ragged, mixed, atContext int
			for _, st := range runSteps(t, sc) {
				if st.Role != datasets.RoleMeasured {
					continue
				}
				reasons := st.SampleReason
				switch {
				case strings.Contains(reasons, "ragged_context"):
					ragged++
					require.Equal(t, datasets.KindDecode, st.Kind)
					require.Positive(t, st.VarDecodeKVTokens)
					mean := float64(st.SumDecodeKVTokens) / float64(st.NumDecodeRequests)
					require.InDelta(t, 800, mean, 2, "step %d", st.StepID)
					require.Contains(t, []int64{1440, 3200}, st.MaxDecodeKVTokens, "1.8 or 4 × the mean (step %d)", st.StepID)
				case strings.Contains(reasons, "mixed_step"):
					mixed++
					require.Equal(t, datasets.KindMixed, st.Kind)
					require.Equal(t, int32(24), st.NumDecodeRequests)
					require.Equal(t, int64(24*1500), st.SumDecodeKVTokens)
					require.Equal(t, int64(1500), st.MaxDecodeKVTokens)
					require.Equal(t, int32(1), st.NumPrefillRequests)
					require.Equal(t, int64(700), st.SumPrefillTokens)
					k := float64(st.SumPrefillKVTokens)
					require.Contains(t, []float64{0, 3000}, k)
					require.Equal(t, 700*(k+350), st.SumPrefillAttn)
					newReqs := int32(1)
					if policy == datasets.PolicyAdmissionStep {
						newReqs = 25
					}
					require.Equal(t, newReqs, st.NumNewReqs, "step %d", st.StepID)
				case strings.Contains(reasons, "prefill_context"):
					atContext++
					require.Equal(t, datasets.KindPrefill, st.Kind)
					require.Equal(t, int64(3000), st.SumPrefillKVTokens)
					require.Equal(t, 700*(3000+350.0), st.SumPrefillAttn)
				}
			}
			require.Equal(t, 4, ragged)
			require.Equal(t, 2, mixed)
			require.Equal(t, 1, atContext)
		})
	}
}
