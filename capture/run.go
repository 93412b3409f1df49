package capture

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
)

// Options configure a capture.
type Options struct {
	Worker WorkerOptions
	// Device is cuda, cuda:N or cpu.
	Device string
	// Preset names a worker model preset (llama-8b, tiny); empty sends the
	// plan's model shape (any dense Llama-family catalog.Shape at TP 1).
	Preset string
	// AttentionBackend: auto, triton or torch.
	AttentionBackend string
	// Seed seeds the worker's random weights.
	Seed int64
	// CheckpointSteps makes the dataset durable every so many steps.
	CheckpointSteps int
	// SamplePeriod of NVML readings (0: 100 ms).
	SamplePeriod time.Duration
	// Stderr receives the worker's log (nil: kept only for error reports).
	Stderr io.Writer
	// Monitor overrides NVML (tests); nil opens NVML and does without it
	// where unavailable.
	Monitor GPUMonitor
	Run     sim.RunOptions
}

// Capture runs the plan's workload through the real scheduler and a GPU
// worker and writes what happened to dir: every step with the bytes
// really shipped and every timing window on one monotonic clock, the
// worker's own timings, the requests and NVML samples.
//
// The dataset is written as it goes: a worker that dies, hangs or answers
// garbage ends the capture with an error carrying its last stderr lines,
// and the dataset keeps every completed part with a manifest that says it
// is partial.
func Capture(p *scenario.Plan, dir string, opts Options) (*sim.Result, error) {
	if opts.CheckpointSteps == 0 {
		opts.CheckpointSteps = 256
	}
	if opts.SamplePeriod == 0 {
		opts.SamplePeriod = 100 * time.Millisecond
	}
	// A workload or a placement that cannot run is refused before the
	// worker loads a model onto the GPU.
	if !p.Single() {
		return nil, errors.New("a capture runs one engine on its GPU worker: remove the cluster block")
	}
	_, _, cleanup, err := p.Source()
	cleanup()
	if err != nil {
		return nil, err
	}
	proc, ready, err := Start(p, opts)
	if err != nil {
		return nil, err
	}
	// The worker decides how many KV blocks exist and which CUDA graphs it
	// captured; the scheduler must agree with it.
	e := p.Engine()
	e.Sched.NumGPUBlocks = ready.NumGPUBlocks
	e.Graphs = ready.CUDAGraphSizes
	if err := e.Sched.Validate(); err != nil {
		proc.Kill()
		return nil, fmt.Errorf("the worker's KV cache cannot hold this engine config: %w", err)
	}
	clock := NewWallClock()
	exec := NewGPUExecutor(proc, clock, ready.ModelConfig.Vocab, uint64(opts.Seed))
	mon := opts.Monitor
	if mon == nil {
		if m, err := OpenNVML(); err == nil {
			mon = m
			defer m.Close()
		} else if opts.Device == "cpu" {
			slog.Info("no GPU samples", "reason", err)
		} else {
			// On a GPU the reason is the fix (a build without -tags nvml, say).
			slog.Warn("no GPU samples", "reason", err)
		}
	}
	var gpus []GPUInfo
	if mon != nil {
		gpus, _ = mon.Devices()
	}
	var sampler *Sampler
	b := sim.Backend{Exec: exec, Clock: clock, WorkerID: "gpu-0", CheckpointSteps: opts.CheckpointSteps,
		Manifest: func(m *datasets.Manifest) { describe(m, ready, gpus, opts) },
		Started: func(w *datasets.Writer) error {
			if mon == nil {
				return nil
			}
			s, err := StartSampler(mon, w, clock, opts.SamplePeriod)
			sampler = s
			return err
		},
		Stopping: func() error {
			if sampler == nil {
				return nil
			}
			return sampler.Stop()
		},
	}
	res, err := scenario.Execute(p, dir, b, opts.Run)
	if err != nil {
		proc.Kill()
		return nil, err
	}
	if err := exec.Close(); err != nil {
		return res, err
	}
	return res, nil
}

// Start launches the worker and initialises it with the plan's model and
// engine limits. A config that cannot fit on the GPU is refused by the
// worker before it builds anything.
func Start(p *scenario.Plan, opts Options) (*Process, *ReadyMsg, error) {
	e, block := p.Engine(), p.EngineBlocks[0]
	var mc *ModelConfig
	if opts.Preset == "" {
		var err error
		if mc, err = WorkerShape(e.Shape); err != nil {
			return nil, nil, err
		}
	}
	proc, err := StartWorker(opts.Worker, opts.Stderr)
	if err != nil {
		return nil, nil, err
	}
	init := InitMsg{Type: "init", ProtocolVersion: 1, Seed: opts.Seed, Device: orDefault(opts.Device, "cuda"),
		NumGPUBlocks: 0, GPUMemoryUtilization: block.GPUMemoryUtilization, BlockSize: e.Sched.BlockSize,
		MaxNumSeqs: e.Sched.MaxNumSeqs, MaxNumBatchedTokens: e.Sched.MaxNumBatchedTokens, MaxModelLen: e.Sched.MaxModelLen,
		CUDAGraphSizes: e.Graphs, AttentionBackend: orDefault(opts.AttentionBackend, "auto")}
	if block.NumGPUBlocks > 0 {
		init.NumGPUBlocks = block.NumGPUBlocks
	}
	init.Model, init.ModelConfig = opts.Preset, mc
	b, err := Frame(&init)
	if err != nil {
		proc.Kill()
		return nil, nil, err
	}
	if err := proc.Send(b); err != nil {
		proc.Kill()
		return nil, nil, err
	}
	var ready ReadyMsg
	if _, err := proc.Recv(&ready, proc.opts.StartTimeout); err != nil {
		proc.Kill()
		return nil, nil, fmt.Errorf("starting the worker: %w", err)
	}
	if ready.Type != "ready" {
		proc.Kill()
		return nil, nil, fmt.Errorf("worker answered %q to init", ready.Type)
	}
	return proc, &ready, nil
}

// WorkerShape is the worker's model_config for a shape: a dense or
// mixture-of-experts decoder with full GQA attention on one GPU (TP 1),
// weights and KV cache in one dtype (bf16, fp16 or fp32). What the worker
// cannot run is refused here, naming the shape field, before a worker
// starts.
func WorkerShape(s catalog.Shape) (*ModelConfig, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.TP > 1 {
		return nil, fmt.Errorf("model %s: the GPU worker runs one GPU; capture the shape at TP 1", s.Name)
	}
	if f := unrunnableField(s); f != "" {
		return nil, fmt.Errorf("model %s: %s is set: the GPU worker runs dense or mixture-of-experts decoders with full GQA attention only", s.Name, f)
	}
	dtypes := map[string]string{catalog.DTypeBF16: "bfloat16", catalog.DTypeFP16: "float16", catalog.DTypeFP32: "float32"}
	dt, ok := dtypes[s.DType]
	weights, kv := cmp.Or(s.WeightDType, s.DType), cmp.Or(s.KVDType, s.DType)
	if !ok || weights != s.DType || kv != s.DType || cmp.Or(s.MoE.DType, s.DType) != s.DType {
		return nil, fmt.Errorf("model %s: dtype %s, weights %s, KV cache %s: the GPU worker runs bf16, fp16 or fp32 weights with a KV cache of the same dtype",
			s.Name, s.DType, weights, kv)
	}
	return &ModelConfig{Layers: s.Layers, Hidden: s.Hidden, Heads: s.Heads, KVHeads: s.KVHeads, HeadDim: s.HeadDim,
		Intermediate: s.Intermediate, Vocab: s.Vocab, DType: dt, TieWordEmbeddings: s.TiedEmbeddings, QKVBias: s.QKVBias,
		Experts: s.MoE.Experts, TopK: s.MoE.TopK, ExpertIntermediate: s.MoE.ExpertIntermediate}, nil
}

// unrunnableField names the first shape field (as the catalogue's JSON
// spells it) of an architecture the worker does not run, or "".
func unrunnableField(s catalog.Shape) string {
	checks := []struct {
		set   bool
		field string
	}{
		{s.MLA.KVLoraRank > 0, "mla.kv_lora_rank"},
		{len(s.Stack) > 0, "stack (linear attention, Mamba or mixed layers)"},
		{s.SlidingLayers > 0, "sliding_layers"},
		{s.AttnOutputGate, "attn_output_gate"},
		{s.MLPMatrices != 0 && s.MLPMatrices != 3, "mlp_matrices"},
		{s.MoE.SharedExperts > 0, "moe.shared_experts"},
		{s.MoE.DenseLayers > 0, "moe.dense_layers"},
		{s.MoE.Latent > 0, "moe.latent"},
	}
	for _, c := range checks {
		if c.set {
			return c.field
		}
	}
	return ""
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// describe records the capture's provenance in the manifest.
func describe(m *datasets.Manifest, r *ReadyMsg, gpus []GPUInfo, opts Options) {
	m.Source.Kind = "capture"
	m.Source.Format = datasets.FormatGPUWorker
	m.Created = time.Now().UTC().Format(time.RFC3339)
	m.Source.Detail = map[string]string{
		"device": r.Device, "torch": r.TorchVersion, "triton": r.TritonVersion, datasets.DetailAttentionBackend: r.AttentionBackend,
		"kv_bytes": strconv.FormatInt(r.KVBytes, 10), "weight_bytes": strconv.FormatInt(r.WeightBytes, 10),
		"build_ns": strconv.FormatInt(r.BuildNs, 10), "graph_capture_ns": strconv.FormatInt(r.GraphCaptureNs, 10),
		"worker_seed": strconv.FormatInt(opts.Seed, 10),
	}
	if len(r.MixedCUDAGraphSizes) > 0 {
		m.Source.Detail["mixed_cuda_graph_sizes"] = strings.Trim(fmt.Sprint(r.MixedCUDAGraphSizes), "[]")
	}
	if r.MixedCUDAGraphMode != "" {
		m.Source.Detail[datasets.DetailMixedCUDAGraphMode] = r.MixedCUDAGraphMode
	}
	if d := r.DecodeAttention; d != nil {
		m.Source.Detail[datasets.DetailDecodeKVTileTokens] = strconv.Itoa(d.KVTileTokens)
		m.Source.Detail[datasets.DetailDecodeSplitPrograms] = strconv.Itoa(d.SplitPrograms)
		m.Source.Detail[datasets.DetailDecodeSplitMax] = strconv.Itoa(d.SplitMax)
		m.Source.Detail[datasets.DetailDecodeSplitRounding] = d.SplitRounding
	}
	hw := &datasets.Hardware{GPUName: r.GPUName, GPUCount: 1}
	if len(gpus) > 0 {
		g := gpus[0]
		hw.GPUName, hw.GPUUUID, hw.Driver = g.Name, g.UUID, g.Driver
		hw.SMClockMHz, hw.MemClockMHz, hw.PowerLimitW, hw.MemTotalBytes = g.SMClockMHz, g.MemClockMHz, g.PowerLimitW, g.MemTotalBytes
	}
	m.Hardware = hw
	mc := r.ModelConfig
	m.Model = &datasets.ModelShape{Name: m.Model.Name, Layers: mc.Layers, Hidden: mc.Hidden, Heads: mc.Heads, KVHeads: mc.KVHeads,
		HeadDim: mc.HeadDim, Intermediate: mc.Intermediate, Vocab: mc.Vocab, DType: mc.DType, TensorParallel: 1,
		TiedEmbeddings: mc.TieWordEmbeddings, QKVBias: mc.QKVBias}
	if mc.Experts > 0 {
		skew := mc.RoutingSkew
		m.Model.MoE = &datasets.ModelMoE{Experts: mc.Experts, TopK: mc.TopK, ExpertIntermediate: mc.ExpertIntermediate,
			RoutingSkew: &skew, RouterLogitStd: r.RouterLogitStd}
	}
	if opts.Preset != "" {
		m.Model.Name = opts.Preset
	}
	m.Engine.NumGPUBlocks = r.NumGPUBlocks
	m.Engine.SerialWorker = true // worker.py: recv, prep, forward, sample, reply, then the next frame
	// Every size the worker captured, decode rows and prefill/mixed tokens
	// alike (vLLM's capture sizes count tokens): the largest is where a
	// step stops replaying a graph.
	m.CUDAGraphSizes = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(r.CUDAGraphSizes), r.MixedCUDAGraphSizes...))))
}
