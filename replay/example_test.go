package replay_test

import (
	"fmt"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/pricing"
	"github.com/steplab/steplab/replay"
)

// Step replay of a captured run: the ops prior (the H200's kernel
// database for the run's model shape, chosen from its manifest) prices
// every recorded step's composition, and the summary says how far each
// timing field is from the record, per step kind. That database measured
// vLLM's kernels; the run was captured on steplab's own worker, whose
// kernels are slower (docs/ops-prior.md): calibrate, or fit the run's
// grid, to price it.
func ExampleReplaySteps() {
	d, err := datasets.Open("../datasets/h200/traffic-azure-5rps")
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := pricing.FromManifest(d.Manifest, pricing.FPMPrior, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := replay.ReplaySteps(d, replay.StepOptions{FPM: p.FPM, Host: p.Host})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d steps priced by %s\n", s.Steps, pricing.Name(p))
	for _, g := range s.ByKind {
		e := g.Fields[replay.FieldGPU]
		fmt.Printf("%-7s %5d steps: device time MAPE %.0f%%, total %+.0f%%\n", g.Group, g.Steps, 100*e.MAPE, 100*e.RelErrOfMean)
	}
	// Output:
	// 6024 steps priced by ops(h200-sxm-vllm-0.24.0, Llama-3.1-8B)
	// prefill     7 steps: device time MAPE 61%, total -55%
	// decode   5749 steps: device time MAPE 25%, total -25%
	// mixed     268 steps: device time MAPE 43%, total -39%
}
