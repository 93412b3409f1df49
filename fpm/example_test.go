package fpm_test

import (
	"fmt"
	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/fpm"
)

// A roofline prior prices a step from the hardware and the model shape
// alone: here a steady decode step of 256 requests at 4K tokens of context
// each, and a fresh 8K-token prefill, for Llama-3.1-8B on an H200.
func ExampleRoofline() {
	hw, _ := catalog.LookupHardware("H200")
	shape, _ := catalog.LookupModel("Llama-3.1-8B")
	r := fpm.NewRoofline(hw, shape)

	decode := fpm.Features{DecodeRequests: 256, PaddedBatch: 256, DecodeKVTokens: 256 * 4096}
	prefill := fpm.Features{PrefillTokens: 8192, PrefillRequests: 1, PrefillAttn: 8192 * 8192 / 2}

	b := r.Breakdown(decode)
	fmt.Printf("decode B=256: %.1f ms, %.0f%% of it KV reads\n", b.TotalNs/1e6, 100*b.DecodeAttnNs/b.TotalNs)
	p := r.Breakdown(prefill)
	fmt.Printf("prefill 8K: %.1f ms, GEMMs %s-bound\n", p.TotalNs/1e6, p.GEMMBound)
	// Output:
	// decode B=256: 37.4 ms, 85% of it KV reads
	// prefill 8K: 179.4 ms, GEMMs compute-bound
}

// The payload model reproduces the source document's observation: an
// admission step ships the full prompts of its requests, a steady step
// only their deltas.
func ExamplePayloadModel() {
	p := fpm.DefaultPayloadModel()
	const b, ctx, blockSize = 513, 4100, 16
	blocks := (ctx + blockSize - 1) / blockSize

	admission := p.StepBytes(fpm.PayloadStep{NewReqs: b, NewTokens: b * ctx, NewBlocks: b * blocks})
	steady := p.StepBytes(fpm.PayloadStep{CachedReqs: b})
	fmt.Printf("admission: %.2f MB\n", float64(admission)/1e6)
	fmt.Printf("steady:    %.2f KB\n", float64(steady)/1e3)
	fmt.Printf("one new request: %d B, one cached: %d B\n", p.NewReqBytes(ctx, blocks), p.CachedReqBytes(0, false, ctx))
	// Output:
	// admission: 8.59 MB
	// steady:    6.76 KB
	// one new request: 16746 B, one cached: 12 B
}

// The host model prices the work around a step; an admitted batch pays
// for its prompts, its blocks and its first-step bookkeeping.
func ExampleHostModel() {
	h := fpm.DefaultHostModel()
	p := fpm.DefaultPayloadModel()
	const b, ctx = 256, 4096
	admission := h.Times(fpm.HostStep{Requests: b, NewRequests: b, ScheduledTokens: b, NewTokens: b * ctx,
		PayloadBytes: p.StepBytes(fpm.PayloadStep{NewReqs: b, NewTokens: b * ctx, NewBlocks: b * ctx / 16})})
	steady := h.Times(fpm.HostStep{Requests: b, ScheduledTokens: b,
		PayloadBytes: p.StepBytes(fpm.PayloadStep{CachedReqs: b})})
	fmt.Printf("admission host: %.1f ms\n", float64(admission.TotalNs())/1e6)
	fmt.Printf("steady host:    %.1f ms\n", float64(steady.TotalNs())/1e6)
	// Output:
	// admission host: 78.9 ms
	// steady host:    3.1 ms
}

// KVBlocks sizes the KV cache, and refuses a model that does not fit.
func ExampleKVBlocks() {
	h200, _ := catalog.LookupHardware("H200")
	h100, _ := catalog.LookupHardware("H100")
	llama8B, _ := catalog.LookupModel("Llama-3.1-8B")
	llama70B, _ := catalog.LookupModel("Llama-3.1-70B")
	n, _ := catalog.KVBlocks(h200, llama8B, 16, 0.9, 0)
	fmt.Printf("Llama-3.1-8B on H200: %d blocks of 16 tokens\n", n)
	_, err := catalog.KVBlocks(h100, llama70B, 16, 0.9, 0)
	fmt.Println(err)
	// Output:
	// Llama-3.1-8B on H200: 56387 blocks of 16 tokens
	// model: Llama-3.1-70B does not fit on H100-SXM: it needs 141 GB of weights per GPU at TP=1, and the GPU has 86 GB (80 GiB), 77 GB of it at gpu_memory_utilization 0.90: raise tensor parallel to 2 or more (tensor_parallel=2)
}

// LookupHardware resolves a GPU from any spelling a tool reports — NVML's
// device name, a folder name, a short name — or from a spec file's path.
func ExampleLookupHardware() {
	for _, name := range []string{"NVIDIA GeForce RTX 4090", "H100_80GB_HBM3", "h200"} {
		hw, err := catalog.LookupHardware(name)
		if err != nil {
			fmt.Println(err)
			continue
		}
		link, _ := hw.TPLink()
		fmt.Printf("%-24s -> %s: %g GB at %g GB/s, %g dense bf16 TFLOPS, TP over %s\n",
			name, hw.Name, hw.MemGB, hw.MemBandwidthGBs, hw.TFLOPS.BF16, link.Kind)
	}
	// Output:
	// NVIDIA GeForce RTX 4090  -> RTX-4090: 24 GB at 1008 GB/s, 165.2 dense bf16 TFLOPS, TP over pcie
	// H100_80GB_HBM3           -> H100-SXM: 80 GB at 3350 GB/s, 989 dense bf16 TFLOPS, TP over nvlink
	// h200                     -> H200-SXM: 141 GB at 4800 GB/s, 989 dense bf16 TFLOPS, TP over nvlink
}

// LookupModel resolves a model from its Hugging Face name (org prefix and
// fine-tune suffixes allowed) or a config.json path; an MoE prices a
// batch-1 decode by the experts it actually reads.
func ExampleLookupModel() {
	s, _ := catalog.LookupModel("Qwen/Qwen3-30B-A3B-Instruct-2507")
	fmt.Printf("%s: %d layers, %d experts top-%d, %.1fB parameters, %.1fB active\n",
		s.Name, s.Layers, s.MoE.Experts, s.MoE.TopK, float64(s.ParamCount())/1e9, float64(s.ActiveParamCount())/1e9)
	fmt.Printf("weights streamed per step: %.1f GB at 1 token, %.1f GB at 256\n",
		s.StreamedWeightBytesAt(1)/1e9, s.StreamedWeightBytesAt(256)/1e9)
	ds, _ := catalog.LookupModel("deepseek-ai/DeepSeek-V3")
	fmt.Printf("%s: %d KV bytes per token (MLA latent), %s weights\n", ds.Name, ds.KVBytesPerToken(), ds.WeightDType)
	// Output:
	// Qwen3-30B-A3B: 48 layers, 128 experts top-8, 30.5B parameters, 3.4B active
	// weights streamed per step: 6.1 GB at 1 token, 60.4 GB at 256
	// DeepSeek-V3: 70272 KV bytes per token (MLA latent), fp8 weights
}

// A recipe prices each step kind with the model the data supports: here
// decode steps by a benchmark table inside its hull (a 2×2 grid of batch
// × context) and by a linear form outside it, each prediction with a 90%
// interval and the region that priced it.
func ExampleRecipe() {
	q := &fpm.ResidualQuantiles{Scale: fpm.ScaleRelative, P: []float64{0.05, 0.5, 0.95}, Values: []float64{-0.03, 0, 0.05}}
	r := &fpm.Recipe{Level: 0.9, Kinds: []fpm.RecipeKind{{
		Kind: "decode",
		Table: &fpm.Table{Axes: []fpm.TableAxis{
			{Coord: fpm.TermDecodeRequests, Nodes: []float64{1, 64}},
			{Coord: fpm.CoordKVPerRequest, Nodes: []float64{128, 4096}},
		}, Ns: []float64{6.0e6, 6.4e6, 8.0e6, 17.0e6}},
		Terms: []string{fpm.TermConst, fpm.TermDecodeRequests, fpm.TermDecodeKVTokens},
		Coefficients: []fpm.Coefficient{{Term: fpm.TermConst, Value: 6e6}, {Term: fpm.TermDecodeRequests, Value: 3e4},
			{Term: fpm.TermDecodeKVTokens, Value: 40}},
		Residuals: map[string]*fpm.ResidualQuantiles{fpm.RegionAll: q},
	}}}
	if err := r.Validate(); err != nil {
		panic(err)
	}
	for _, b := range []float64{32, 256} {
		p := r.Price(fpm.Features{DecodeRequests: b, DecodeKVTokens: b * 1024}, 0.9)
		fmt.Printf("B=%3.0f: %.2f ms [%.2f, %.2f], %s by the %s model\n", b, p.Ns/1e6, p.Lo/1e6, p.Hi/1e6, p.Region, p.Kind)
	}
	// Output:
	// B= 32: 8.03 ms [7.79, 8.43], interpolated by the decode model
	// B=256: 24.17 ms [23.44, 25.37], extrapolated by the decode model
}
