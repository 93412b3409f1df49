package sim_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/validate"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
)

var (
	flagPayloadSeeds = flag.Int("sim.seeds", 12, "number of seeds for TestPayloadSharesAddUp")
	flagPayloadSeed  = flag.Int64("sim.seed", -1, "run TestPayloadSharesAddUp for this one seed only")
)

// randomScenario draws a small scenario: an open-loop, closed-loop or
// benchmark workload on a random engine (block size, batch limits, a KV
// cache tight enough to preempt, chunked prefill and prefix caching on or
// off).
func randomScenario(rng *rand.Rand, seed int64) scenario.Scenario {
	sc := scenario.Default()
	sc.Seed = uint64(seed)
	e := &sc.Engine
	e.BlockSize = 8 << rng.IntN(3)
	e.MaxModelLen = 4096
	e.MaxNumSeqs = 1 + rng.IntN(64)
	e.ChunkedPrefill = rng.IntN(3) != 0
	e.MaxNumBatchedTokens = e.MaxModelLen
	if e.ChunkedPrefill {
		e.MaxNumBatchedTokens = 256 << rng.IntN(5)
	}
	e.PrefixCaching = rng.IntN(2) == 0
	e.NumGPUBlocks = e.MaxModelLen/e.BlockSize + rng.IntN(2000)
	length := func(mean float64, max int) scenario.LengthSpec {
		return scenario.LengthSpec{Kind: "lognormal", Mean: mean, Sigma: 0.3 + rng.Float64(), Min: 1, Max: max}
	}
	n := 20 + rng.IntN(100)
	switch rng.IntN(4) {
	case 0:
		sc.Workload = scenario.WorkloadSpec{Kind: "poisson", RateRPS: 1 + 80*rng.Float64(), Requests: n,
			Prompt: length(50+1500*rng.Float64(), 3000), Output: length(5+200*rng.Float64(), 900)}
	case 1:
		sc.Workload = scenario.WorkloadSpec{Kind: "gamma", RateRPS: 1 + 80*rng.Float64(), CV: 0.5 + 3*rng.Float64(), Requests: n,
			Prompt: length(50+1500*rng.Float64(), 3000), Output: length(5+200*rng.Float64(), 900)}
	case 2:
		sc.Workload = scenario.WorkloadSpec{Kind: "closed", Users: 1 + rng.IntN(32), Requests: n, ThinkS: rng.Float64(), Think: "exponential",
			Prompt: length(50+1500*rng.Float64(), 3000), Output: length(5+200*rng.Float64(), 900)}
	default:
		policies := []string{datasets.PolicySteadyStateSecondStep, datasets.PolicyAdmissionStep}
		e.MaxNumSeqs = 64
		sc.Workload = scenario.WorkloadSpec{Kind: "benchmark", Benchmark: scenario.BenchmarkSpec{Mode: "agg", Policy: policies[rng.IntN(2)],
			DecodeBatchSizes: []int{1 + rng.IntN(8), 9 + rng.IntN(56)}, DecodeContexts: []int{16 + rng.IntN(500), 600 + rng.IntN(1500)},
			PrefillTokens: []int{64 + rng.IntN(e.MaxNumBatchedTokens-64)}}}
	}
	return sc
}

// TestPayloadSharesAddUp simulates random scenarios, with async scheduling
// and without, and checks every step of the dataset written: its
// step_requests.payload_bytes add up to payload_new_bytes +
// payload_cached_bytes (the new rows to payload_new_bytes), which is at
// most payload_bytes; and the dataset passes validate. Under async
// scheduling a step is recorded after the next one was submitted, so a
// per-request buffer shared between the two shows here.
//
// Reproduce a failure with: go test ./sim -run TestPayloadSharesAddUp -sim.seed=N
func TestPayloadSharesAddUp(t *testing.T) {
	first, n := int64(0), int64(*flagPayloadSeeds)
	if *flagPayloadSeed >= 0 {
		first, n = *flagPayloadSeed, 1
	}
	var checked int
	for seed := first; seed < first+n; seed++ {
		for _, async := range []bool{true, false} {
			sc := randomScenario(rand.New(rand.NewPCG(uint64(seed), 13)), seed)
			sc.Engine.AsyncScheduling = async
			steps, err := payloadSharesAddUp(t, sc)
			if err != nil {
				t.Fatalf("seed %d (async %v): %v\nreproduce: go test ./sim -run TestPayloadSharesAddUp -sim.seed=%d", seed, async, err, seed)
			}
			checked += steps
		}
	}
	t.Logf("%d steps checked", checked)
}

func payloadSharesAddUp(t *testing.T, sc scenario.Scenario) (int, error) {
	p, err := sc.Plan()
	if err != nil {
		return 0, err
	}
	dir := filepath.Join(t.TempDir(), "ds")
	if _, err := scenario.Run(p, dir, sim.RunOptions{Command: []string{"test"}}); err != nil {
		return 0, err
	}
	d, err := datasets.Open(dir)
	if err != nil {
		return 0, err
	}
	steps, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
	if err != nil {
		return 0, err
	}
	rows, err := datasets.ReadAll[datasets.StepRequest](d, datasets.TableStepRequests)
	if err != nil {
		return 0, err
	}
	if len(steps) == 0 {
		return 0, fmt.Errorf("no steps simulated")
	}
	k := 0
	for _, st := range steps {
		var all, nw int64
		for ; k < len(rows) && rows[k].StepID == st.StepID; k++ {
			all += rows[k].PayloadBytes
			if rows[k].IsNew {
				nw += rows[k].PayloadBytes
			}
		}
		if want := st.PayloadNewBytes + st.PayloadCachedBytes; all != want || nw != st.PayloadNewBytes {
			return 0, fmt.Errorf("step %d: step_requests.payload_bytes add up to %d (new rows %d), want payload_new_bytes %d + payload_cached_bytes %d = %d",
				st.StepID, all, nw, st.PayloadNewBytes, st.PayloadCachedBytes, want)
		}
		if all > st.PayloadBytes {
			return 0, fmt.Errorf("step %d: requests' shares %d exceed payload_bytes %d", st.StepID, all, st.PayloadBytes)
		}
	}
	if k != len(rows) {
		return 0, fmt.Errorf("step_requests row %d (step %d) follows no step", k, rows[k].StepID)
	}
	r, err := validate.Dataset(dir, validate.Options{})
	if err != nil {
		return 0, err
	}
	if r.Errors > 0 {
		return 0, fmt.Errorf("validate: %d errors, first %+v", r.Errors, r.Violations[0])
	}
	return len(steps), nil
}
