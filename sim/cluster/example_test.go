package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/cluster"
)

// A disaggregated placement: two prefill and three decode engines behind
// Dynamo's KV router, the prompt KV moving over a 50 GB/s link.
func ExampleScenario_Plan() {
	sc := scenario.Default()
	for _, s := range []string{
		"cluster.pools={prefill: {role: prefill, replicas: 2}, decode: {role: decode, replicas: 3}}",
		"cluster.router.name=kv",
		"cluster.links.kv_transfer={bandwidth_gbs: 50, latency_us: 20}",
	} {
		if err := sc.Set(s); err != nil {
			fmt.Println(err)
			return
		}
	}
	p, err := sc.Plan()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, pp := range p.Pools {
		fmt.Printf("%s: %d × %s on %s, %d KV blocks each\n", pp.Role, pp.Replicas, pp.Engine.Shape.Name, pp.Engine.HW.Name, pp.Engine.Sched.NumGPUBlocks)
	}
	fmt.Printf("%d GPUs; a 1,000-token prompt moves %.1f MB in %.0f µs\n", p.GPUs(),
		float64(1000*p.KVBytesPerToken)/1e6, p.KVLink.TransferNs(float64(1000*p.KVBytesPerToken))/1e3)
	// Output:
	// prefill: 2 × Llama-3.1-8B on H200-SXM, 56387 KV blocks each
	// decode: 3 × Llama-3.1-8B on H200-SXM, 56387 KV blocks each
	// 5 GPUs; a 1,000-token prompt moves 131.1 MB in 2641 µs
}

// Four replicas behind the KV router on a Poisson workload: the dataset
// gains a routes table beside the engines' tables.
func ExampleRun() {
	sc := scenario.Default()
	sc.Workload = scenario.WorkloadSpec{Kind: "poisson", RateRPS: 20, Requests: 200,
		Prompt: scenario.LengthSpec{Kind: "fixed", Value: 1000}, Output: scenario.LengthSpec{Kind: "fixed", Value: 100}}
	_ = sc.Set("cluster.pools={sim: {replicas: 4}}")
	_ = sc.Set("cluster.router.name=least_requests")
	p, err := sc.Plan()
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, _ := os.MkdirTemp("", "cluster-example-")
	defer os.RemoveAll(dir)
	res, err := scenario.Run(p, filepath.Join(dir, "ds"), sim.RunOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, routes := os.Stat(filepath.Join(dir, "ds", cluster.TableRoutes+".parquet"))
	fmt.Printf("%d requests finished on %d engines; routes table: %v\n", res.Finished, p.Engines(), routes == nil)
	// Output:
	// 200 requests finished on 4 engines; routes table: true
}

// Qwen3-30B-A3B on two RTX PRO 6000 as vLLM's data_parallel_size 2 with
// expert parallelism: the catalogue brings the GPU, its PCIe link and the
// model's 128 experts; each rank prices the model without them.
func ExampleScenario_Plan_expertParallel() {
	sc := scenario.Default()
	for _, s := range []string{
		"hardware=RTXPRO6000",
		"model=Qwen/Qwen3-30B-A3B-Instruct-2507",
		"cluster.pools={dp: {replicas: 2, expert_parallel: 2}}",
		"cluster.router.name=vllm_dp",
	} {
		if err := sc.Set(s); err != nil {
			fmt.Println(err)
			return
		}
	}
	p, err := sc.EnginePlan()
	if err != nil {
		fmt.Println(err)
		return
	}
	pp := p.Pools[0]
	fmt.Printf("%d ranks of %s: %d experts, top %d\n", pp.Replicas, p.Shape.Name, p.Shape.MoE.Experts, p.Shape.MoE.TopK)
	fmt.Printf("each rank prices %.1fB parameters and holds %d KV blocks\n", float64(pp.Engine.Shape.ParamCount())/1e9, pp.Engine.Sched.NumGPUBlocks)
	fmt.Printf("all-to-all over %.0f GB/s, %.0f µs\n", pp.ExpertLink.BytesPerSec/1e9, pp.ExpertLink.LatencyNs/1e3)
	// Output:
	// 2 ranks of Qwen3-30B-A3B: 128 experts, top 8
	// each rank prices 1.5B parameters and holds 37611 KV blocks
	// all-to-all over 64 GB/s, 15 µs
}
