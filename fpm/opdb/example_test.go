package opdb_test

import (
	"fmt"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/fpm/opdb"
)

// The measured-operations prior prices a step from kernels measured on the
// GPU: here Llama-3.1-8B on an H200 from the database shipped for it
// (vLLM 0.24.0's kernels), a steady decode step of 64 requests at 2K
// tokens of context and a fresh 4K-token prompt.
func ExamplePrior() {
	hw, _ := catalog.LookupHardware("H200")
	shape, _ := catalog.LookupModel("meta-llama/Llama-3.1-8B")
	o, notes, err := opdb.Prior("ops", opdb.Query{Hardware: hw, Shape: shape})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(notes[0])
	decode := o.Breakdown(fpm.Features{DecodeRequests: 64, PaddedBatch: 64, DecodeKVTokens: 64 * 2048})
	fmt.Printf("decode B=64 at 2K: %.1f ms (GEMMs %.1f, attention %.1f)\n", decode.TotalNs/1e6, decode.GEMMNs/1e6, decode.GenerationAttnNs/1e6)
	prefill := o.Breakdown(fpm.Features{PrefillTokens: 4096, PrefillRequests: 1, PrefillAttn: 4096 * 4096 / 2})
	fmt.Printf("prefill 4K: %.1f ms (GEMMs %.1f, attention %.1f)\n", prefill.TotalNs/1e6, prefill.GEMMNs/1e6, prefill.ContextAttnNs/1e6)
	fmt.Println("past the measured grid:", prefill.Extrapolated)
	// Output:
	// ops: database h200-sxm-vllm-0.24.0, shipped for H200-SXM
	// decode B=64 at 2K: 9.5 ms (GEMMs 4.3, attention 4.5)
	// prefill 4K: 91.2 ms (GEMMs 76.8, attention 8.6)
	// past the measured grid: [lm_head]
}
