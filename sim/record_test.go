package sim

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/features"
	"github.com/steplab/steplab/model"
)

// recordingFPM keeps the features of every step it prices, in step order.
type recordingFPM struct {
	model.FPM
	seen []model.Features
}

func (r *recordingFPM) PredictNs(f model.Features) float64 {
	r.seen = append(r.seen, f)
	return r.FPM.PredictNs(f)
}

// The features the simulator prices are the features a reader maps from
// the written steps row (features.Of), and from the row with its feature
// columns erased and completed from step_requests: one definition, exact
// both ways. The only rows that differ are decode benchmark admission
// steps, priced as the prefill the scheduler ran and recorded as the decode
// point they measure.
func TestRecordedFeaturesRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Scenario)
	}{
		{"trace", func(sc *Scenario) { sc.Workload.Limit = 300 }},
		{"preempting", func(sc *Scenario) {
			sc.Workload = WorkloadSpec{Kind: "poisson", RateRPS: 40, Requests: 300,
				Prompt: LengthSpec{Kind: "lognormal", Mean: 1500, Sigma: 0.8, Max: 8000},
				Output: LengthSpec{Kind: "lognormal", Mean: 300, Sigma: 0.7, Max: 2000}}
			sc.Engine.NumGPUBlocks, sc.Engine.MaxModelLen = 1500, 16384
		}},
		{"eager", func(sc *Scenario) {
			sc.Workload.Limit = 200
			sc.Engine.CUDAGraphSizes, sc.Engine.MaxNumBatchedTokens = nil, 1024
		}},
		{"grid", func(sc *Scenario) {
			sc.Engine.NumGPUBlocks = 20000
			sc.Workload = WorkloadSpec{Kind: "benchmark", Benchmark: BenchmarkSpec{Mode: "agg",
				DecodeBatchSizes: []int{1, 7, 32}, DecodeContexts: []int{64, 1000}, PrefillTokens: []int{300, 2000}}}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc := DefaultScenario()
			c.mod(&sc)
			p, err := sc.Plan()
			require.NoError(t, err)
			rec := &recordingFPM{FPM: p.FPM}
			p.FPM = rec
			dir := filepath.Join(t.TempDir(), "ds")
			_, err = Run(p, dir, RunOptions{})
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
					require.Equal(t, datasets.KindDecode, st.Kind, "step %d", st.StepID)
					require.Equal(t, st.NumNewReqs, st.NumDecodeRequests, "step %d: an admission step", st.StepID)
					relabelled++
					continue
				}
				require.Equal(t, rec.seen[i], features.Of(st), "step %d", st.StepID)
				require.Equal(t, rec.seen[i], features.Of(&erased[i]), "step %d from step_requests", st.StepID)
			}
			if c.name != "grid" {
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
