package scenario_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
)

// A scenario, planned and run: two engines behind the KV router serving
// a Poisson workload, then the refusal of a scenario that cannot run.
func Example() {
	sc := scenario.Default()
	sc.Workload = scenario.WorkloadSpec{Kind: "poisson", RateRPS: 20, Requests: 200,
		Prompt: scenario.LengthSpec{Kind: "lognormal", Mean: 600, Sigma: 0.5, Max: 4000},
		Output: scenario.LengthSpec{Kind: "fixed", Value: 64}}
	if err := sc.Set("cluster.pools={sim: {replicas: 2}}"); err != nil {
		panic(err)
	}
	sc.Cluster.Router.Name = "kv"
	p, err := sc.Plan()
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d engines on %s behind %s, %d KV blocks each\n", p.Engines(), p.Engine().HW.Name, p.Router.Name, p.Engine().Sched.NumGPUBlocks)

	dir, err := os.MkdirTemp("", "scenario-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	res, err := scenario.Run(p, filepath.Join(dir, "ds"), sim.RunOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d requests finished\n", res.Requests)

	// A model too large for one GPU is refused, and the message says what
	// to change.
	big := scenario.Default()
	big.Hardware, big.Model = "H100", "Llama-3.1-70B"
	_, err = big.Plan()
	fmt.Println(err)
	// Output:
	// 2 engines on H200-SXM behind kv, 56387 KV blocks each
	// 200 requests finished
	// model: Llama-3.1-70B does not fit on H100-SXM: it needs 141 GB of weights per GPU at TP=1, and the GPU has 86 GB (80 GiB), 77 GB of it at gpu_memory_utilization 0.90: raise tensor parallel to 2 or more (tensor_parallel=2)
}
