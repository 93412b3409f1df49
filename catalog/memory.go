package catalog

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrDoesNotFit is what the refusals of KVBlocks (and of a KV cache sized
// by it too small for one request) are: a configuration search prunes a
// candidate on it and refuses on any other error.
var ErrDoesNotFit = errors.New("does not fit in GPU memory")

// NoFit marks err as a refusal for memory (errors.Is(err, ErrDoesNotFit)),
// its message unchanged.
func NoFit(err error) error { return noFit{err} }

type noFit struct{ error }

func (e noFit) Unwrap() error      { return e.error }
func (noFit) Is(target error) bool { return target == ErrDoesNotFit }

// Memory model: how many KV blocks vLLM would allocate. vLLM v1 takes
// gpu_memory_utilization × total device memory, subtracts the weights, the
// peak activation memory of a profiling forward pass at
// max_num_batched_tokens, and non-torch allocations (CUDA context, NCCL and
// CUDA-graph pools), and gives the rest to the KV cache. We follow the same
// budget with the activation peak estimated from the shape instead of
// profiled (ActivationReserveBytes), so the count is an estimate, typically
// within a few percent of what vLLM logs as "GPU KV cache size".

// Activation-reserve assumptions (vLLM defaults).
const (
	// reserveProfileTokens is the token count of vLLM's profiling pass
	// (max_num_batched_tokens, 8192 by default for online serving).
	reserveProfileTokens = 8192
	// reserveSamplerSeqs is max_num_seqs (256): the sampler is profiled
	// with that many rows of fp32 logits.
	reserveSamplerSeqs = 256
	// reserveNonTorchBytes covers the CUDA context, NCCL buffers and the
	// CUDA-graph memory pool.
	reserveNonTorchBytes = 1 << 30
)

// ActivationReserveBytes estimates what vLLM keeps out of the KV cache
// besides the weights, per GPU: 1 GiB of non-torch memory, the peak
// activations of an 8192-token pass (the gate/up output of the MLP, 2·I/TP
// wide, and four hidden-sized buffers per token: residual, normed input,
// attention output, MLP output), and 256 rows of fp32 logits for the
// sampler. About 1.9 GB for Llama-3.1-8B. An MoE's MLP width is the
// widest of its dense MLP (where it has dense layers) and its top-k routed
// plus shared experts.
func ActivationReserveBytes(s Shape) int64 {
	tp := float64(s.TPDegree())
	width := float64(s.Intermediate)
	if m := s.MoE; s.IsMoE() {
		moe := float64(m.TopK*m.ExpertIntermediate + m.SharedExperts*m.SharedIntermediate)
		if m.DenseLayers == 0 || moe > width {
			width = moe
		}
	}
	perToken := (2*width/tp + 4*float64(s.Hidden)) * DTypeBytes(s.DType)
	logits := float64(reserveSamplerSeqs) * float64(s.Vocab) * 4
	return int64(reserveNonTorchBytes + reserveProfileTokens*perToken + logits)
}

// KVBlocks is the number of KV-cache blocks of blockSize tokens that fit on
// one GPU of hw running shape s at gpu_memory_utilization gpuMemUtil:
//
//	floor((util·MemBytes − WeightBytes − ActivationReserveBytes) / (blockSize·KVBytesPerToken))
//
// with every weight at its dtype and every expert counted (all of them
// stay resident), less max_num_seqs (256) requests' constant states
// (StateBytesPerRequest: linear-attention and Mamba-2 layers hold a fixed
// state per running request). KVBytesPerToken counts the layers that
// hold every token (full, MLA, DSA); the sliding and chunked layers'
// at most window tokens per request are not set aside (freed past the
// window, they are few next to the full layers' for long contexts; a
// shape notes it).
//
// It is an error, worded for someone choosing a scenario, when the weights
// alone do not fit (with the smallest tensor-parallel degree that would
// fit), when nothing is left for the KV cache, or when the arguments are
// out of range. The simulator uses it to refuse impossible scenarios.
//
// expertParallel > 1 is one GPU of an expert-parallel instance of that
// many engines (vLLM enable_expert_parallel): the routed experts of a
// mixture of experts are spread over expertParallel × TP GPUs, so the GPU
// holds the dense part (DenseShape) whole and its share of the experts,
// and the wider activations of the routed MLP (the whole shape's reserve
// over the dense part's) come out of the budget too. 0 or 1, or a shape
// without routed experts: every engine holds the whole model.
func KVBlocks(hw Hardware, s Shape, blockSize int, gpuMemUtil float64, expertParallel int) (int, error) {
	if expertParallel > 1 && s.MoE.Experts > 0 {
		return expertKVBlocks(hw, s, expertParallel*max(1, s.TP), blockSize, gpuMemUtil)
	}
	return denseKVBlocks(hw, s, blockSize, gpuMemUtil)
}

// expertKVBlocks is KVBlocks of one GPU of an expert-parallel instance of
// gpus GPUs.
func expertKVBlocks(hw Hardware, s Shape, gpus, blockSize int, util float64) (int, error) {
	if util <= 0 || util > 1 {
		return 0, fmt.Errorf("engine.gpu_memory_utilization is %g: use a fraction in (0, 1]", util)
	}
	dense := DenseShape(s)
	experts := float64(s.MoE.Experts) / float64(max(1, gpus)) * float64(s.MoELayers()) * s.ExpertBytes()
	if experts >= util*hw.MemBytes() {
		return 0, fmt.Errorf("the experts need %.0f GB per GPU over %d GPUs but %s offers %.0f GB at gpu_memory_utilization %g: spread them over more GPUs (expert_parallel)",
			experts/1e9, gpus, hw.Name, util*hw.MemBytes()/1e9, util)
	}
	extra := experts + float64(ActivationReserveBytes(s)-ActivationReserveBytes(dense))
	kv := hw
	kv.MemGB -= extra / util / (1 << 30)
	return denseKVBlocks(kv, dense, blockSize, util)
}

// denseKVBlocks is KVBlocks of a GPU that holds the whole model.
func denseKVBlocks(hw Hardware, s Shape, blockSize int, gpuMemUtil float64) (int, error) {
	if err := hw.Validate(); err != nil {
		return 0, err
	}
	if err := s.Validate(); err != nil {
		return 0, err
	}
	if blockSize <= 0 {
		return 0, fmt.Errorf("model: block size must be > 0, got %d", blockSize)
	}
	if !(gpuMemUtil > 0 && gpuMemUtil <= 1) {
		return 0, fmt.Errorf("model: gpu_memory_utilization must be in (0, 1], got %v", gpuMemUtil)
	}
	budget := gpuMemUtil * hw.MemBytes()
	weights := float64(s.WeightBytes())
	reserve := float64(ActivationReserveBytes(s))
	if weights+reserve >= budget {
		if weights > budget || weights+reserve >= hw.MemBytes() {
			msg := fmt.Sprintf("model: %s does not fit on %s: it needs %.0f GB of weights per GPU at TP=%d, and the GPU has %.0f GB (%.0f GiB), %.0f GB of it at gpu_memory_utilization %.2f",
				s.Name, hw.Name, weights/1e9, s.TPDegree(), hw.MemBytes()/1e9, hw.MemGB, budget/1e9, gpuMemUtil)
			if tp := minFittingTP(hw, s, gpuMemUtil); tp > 0 {
				return 0, NoFit(fmt.Errorf("%s: raise tensor parallel to %d or more (tensor_parallel=%d)", msg, tp, tp))
			}
			return 0, NoFit(fmt.Errorf("%s, and no tensor-parallel degree that divides its %d heads and fills whole nodes of %s makes it fit", msg, s.Heads, hw.Name))
		}
		return 0, NoFit(fmt.Errorf("model: %s at TP=%d on %s leaves no memory for the KV cache: %.1f GB of weights and %.1f GB of activations exceed %.1f GB (gpu_memory_utilization %.2f of %.0f GB): %s",
			s.Name, s.TPDegree(), hw.Name, weights/1e9, reserve/1e9, budget/1e9, gpuMemUtil, hw.MemBytes()/1e9, roomForKV(hw, s, blockSize, gpuMemUtil)))
	}
	// Constant states are held by every running request: set aside for
	// max_num_seqs of them.
	perRequest := float64(reserveSamplerSeqs) * float64(s.StateBytesPerRequest())
	blockBytes := float64(blockSize) * float64(s.KVBytesPerToken())
	n := math.Floor((budget - weights - reserve - perRequest) / blockBytes)
	if n < 1 {
		return 0, NoFit(fmt.Errorf("model: %s at TP=%d on %s: not one KV block of %d tokens fits", s.Name, s.TPDegree(), hw.Name, blockSize))
	}
	return int(n), nil
}

// minFittingTP is the smallest TP above the shape's own, dividing its
// heads, at which weights and activations fit the budget; 0 if none up to
// the head count does.
// roomForKV says which settings leave room for a few KV blocks: a higher
// engine.gpu_memory_utilization where one up to 1 does, and a higher
// tensor parallel.
func roomForKV(hw Hardware, s Shape, blockSize int, util float64) string {
	const blocks = 64 // a cache with room for a few requests, not one block
	need := float64(s.WeightBytes()+ActivationReserveBytes(s)+blocks*int64(blockSize)*s.KVBytesPerToken()) / hw.MemBytes()
	var ways []string
	if u := math.Ceil(need*100) / 100; u <= 1 {
		ways = append(ways, fmt.Sprintf("engine.gpu_memory_utilization=%.2f", u))
	}
	if tp := minFittingTP(hw, s, util); tp > 0 {
		ways = append(ways, fmt.Sprintf("tensor_parallel=%d", tp))
	}
	if len(ways) == 0 {
		return "no setting of gpu_memory_utilization or tensor parallel makes room for it"
	}
	return "set " + strings.Join(ways, " or ")
}

func minFittingTP(hw Hardware, s Shape, util float64) int {
	for tp := s.TPDegree() + 1; tp <= s.Heads; tp++ {
		t := s.WithTP(tp)
		if !runsAt(hw, s, tp, 0) {
			continue
		}
		if float64(t.WeightBytes()+ActivationReserveBytes(t)) < util*hw.MemBytes() {
			return tp
		}
	}
	return 0
}

// runsAt reports a tensor-parallel degree the shape and the hardware both
// take: it divides the heads (Shape.Validate) and fills whole nodes
// (Hardware.Layout), and where util > 0 the weights and activations fit
// in that fraction of the GPU's memory.
func runsAt(hw Hardware, s Shape, tp int, util float64) bool {
	t := s.WithTP(tp)
	if t.Validate() != nil {
		return false
	}
	if _, err := hw.Layout(tp); err != nil {
		return false
	}
	return util <= 0 || float64(t.WeightBytes()+ActivationReserveBytes(t)) < util*hw.MemBytes()
}

// CheckTP refuses a tensor-parallel degree the hardware cannot lay out
// (a group that does not fill whole nodes, or outgrows a node of a device
// without a network link), naming the degrees that work (TPSuggestion).
func CheckTP(hw Hardware, s Shape, util float64) error {
	_, err := hw.Layout(s.TPDegree())
	if err == nil {
		return nil
	}
	if use := TPSuggestion(hw, s, util); use != "" {
		return fmt.Errorf("model: %s on %s: %w: %s", s.Name, hw.Name, err, use)
	}
	return fmt.Errorf("model: %s on %s: %w", s.Name, hw.Name, err)
}

// TPSuggestion names the nearest tensor-parallel degrees below and above
// the shape's that the shape (its heads) and the hardware (its nodes and,
// at gpu_memory_utilization util > 0, its memory) take: "use
// tensor_parallel=8 or 16"; "" when there is none.
func TPSuggestion(hw Hardware, s Shape, util float64) string {
	tp := s.TPDegree()
	var near []string
	for t := tp - 1; t >= 1; t-- {
		if runsAt(hw, s, t, util) {
			near = append(near, strconv.Itoa(t))
			break
		}
	}
	for t := tp + 1; t <= s.Heads; t++ {
		if runsAt(hw, s, t, util) {
			near = append(near, strconv.Itoa(t))
			break
		}
	}
	if len(near) == 0 {
		return ""
	}
	return "use tensor_parallel=" + strings.Join(near, " or ")
}
