package workload_test

import (
	"fmt"

	"github.com/steplab/steplab/sim/workload"
)

// An open-loop Poisson stream at 50 req/s, 20 warm-ups then 1,000 measured
// requests (the R4 workload, docs/architecture.md#r4-offered-load-of-a-serving-workflow).
func Example() {
	src, err := workload.NewOpenLoop(workload.OpenLoopConfig{
		Process:        workload.ProcessPoisson,
		RateRPS:        50,
		Requests:       1000,
		WarmupRequests: 20,
		Seed:           1,
		Lengths: workload.Lengths{
			Prompt: workload.Lognormal(1024, 0.5),
			Output: workload.Uniform(64, 256),
		},
	})
	if err != nil {
		panic(err)
	}
	n, warm := 0, 0
	var last workload.Arrival
	for {
		a, ok := src.Next()
		if !ok {
			break
		}
		n++
		if a.Warmup {
			warm++
		}
		last = a
	}
	fmt.Println(n, warm, last.ID)
	// Output: 1020 20 req-1019
}

// A closed loop driven by a toy engine that serves every request in 2 ms:
// Complete releases the user, who thinks 1 ms and sends again.
func ExampleClosedLoop() {
	src, _ := workload.NewClosedLoop(workload.ClosedLoopConfig{
		Users: 2, ThinkNs: 1e6, Requests: 4,
		Lengths: workload.Lengths{Prompt: workload.Fixed(128), Output: workload.Fixed(16)},
	})
	for {
		a, ok := src.Next()
		if !ok {
			break // every request is completed at once here, so never Waiting
		}
		fmt.Println(a.ID, a.AtNs)
		_ = src.Complete(a.ID, a.AtNs+2e6)
	}
	// Output:
	// req-0 0
	// req-1 0
	// req-2 3000000
	// req-3 3000000
}

// A steady-state decode point of the self-benchmark: B=4 requests at ctx=1 cannot
// give up a token, so the point is clamped and measured at ctx=2.
func ExampleBuildGrid() {
	pts, err := workload.BuildGrid(workload.GridConfig{
		Mode:             workload.ModeDecode,
		Policy:           workload.PolicySteadyStateSecondStep,
		DecodeBatchSizes: []int{4},
		DecodeContexts:   []int{1, 1024},
		MaxModelLen:      4096, MaxNumSeqs: 256, MaxNumBatchedTokens: 8192,
		BlockSize: 16, NumGPUBlocks: 10000,
		CaptureSizes: []int{1, 2, 4, 8},
	})
	if err != nil {
		panic(err)
	}
	for _, p := range pts {
		a := p.Arrivals("b", 0)[0]
		fmt.Println(p.BenchmarkID, p.TotalKVReadTokens, p.Clamped, p.SampleReasons,
			"admit", a.PrecomputedTokens, "measure step", p.Plan.MeasuredStep)
	}
	// Output:
	// 1 8 true [capture explicit context_clamped] admit 1 measure step 1
	// 2 4096 false [capture explicit] admit 1023 measure step 1
}
