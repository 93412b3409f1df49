package sim_test

import (
	"fmt"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/cluster"
	"github.com/steplab/steplab/sim/sched"
	"github.com/steplab/steplab/sim/workload"
)

// One engine from a plan written by hand (package scenario builds the
// same plain data from a YAML scenario): Llama-3.1-8B on an H200 priced by
// the roofline, vLLM's default limits, async scheduling. Sixteen requests
// arrive 20 ms apart; the engine, a cluster of one (package sim/cluster
// builds it with Plan.NewEngine and drives it), admits each with its
// prompt's prefill, then decodes the batch step by step, and the sink
// sees every step and request as the dataset writer would.
func ExamplePlan() {
	hw, err := catalog.LookupHardware("H200")
	if err != nil {
		fmt.Println(err)
		return
	}
	shape, err := catalog.LookupModel("Llama-3.1-8B")
	if err != nil {
		fmt.Println(err)
		return
	}
	p := &sim.Plan{
		Models: fpm.Models{HW: hw, Shape: shape, FPM: fpm.NewRoofline(hw, shape), FPMName: "roofline",
			Host: fpm.DefaultHostModel(), Payload: fpm.DefaultPayloadModel()},
		Sched: sched.Config{MaxNumSeqs: 256, MaxNumBatchedTokens: 8192, BlockSize: 16, NumGPUBlocks: 50000,
			MaxModelLen: 32768, ChunkedPrefill: true, PrefixCaching: true},
		Async: true,
	}
	one := &cluster.Plan{Pools: []*cluster.PoolPlan{{Name: "sim", Role: cluster.RoleBoth, Replicas: 1, Engine: p}}}
	metrics := sim.NewRunMetrics()
	c, err := one.New(cluster.Tee{metrics}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	var arrivals []workload.Arrival
	for i := range 16 {
		arrivals = append(arrivals, workload.Arrival{ID: fmt.Sprint("r", i), AtNs: int64(i) * 20e6, PromptTokens: 1000, OutputTokens: 100})
	}
	end, err := cluster.Drive(c, workload.NewSlice(arrivals))
	if err == nil {
		err = c.Finish(end)
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	r := metrics.Report()
	fmt.Printf("%d of %d requests finished in %.2f s\n", r.Finished, r.Requests, r.DurationS)
	fmt.Printf("steps: %d prefill, %d mixed, %d decode\n", r.Steps["prefill"], r.Steps["mixed"], r.Steps["decode"])
	fmt.Printf("TTFT p50 %.1f ms, ITL p50 %.2f ms\n", r.TTFT.P50, r.ITL.P50)
	// Output:
	// 16 of 16 requests finished in 0.84 s
	// steps: 1 prefill, 15 mixed, 106 decode
	// TTFT p50 40.0 ms, ITL p50 6.08 ms
}
