package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/catalog/manifest"
	"github.com/steplab/steplab/datasets"
)

// Manifest is the provenance the plan's dataset carries. PlanFromManifest
// is its inverse for the engine: hardware, model, FPM and host specs,
// limits, KV capacity, CUDA graphs and async mode come back as they went.
func (p *Plan) Manifest(command []string, inputSHA string) datasets.Manifest {
	sc := p.Scenario
	params := map[string]string{}
	w := sc.Workload
	add := func(k, v string) {
		if v != "" && v != "0" {
			params[k] = v
		}
	}
	add("trace", w.Trace)
	add("rate_rps", strconv.FormatFloat(w.RateRPS, 'g', -1, 64))
	add("requests", strconv.Itoa(w.Requests))
	if len(w.RateCurve) > 0 {
		pts := make([]string, len(w.RateCurve))
		for i, p := range w.RateCurve {
			pts[i] = strconv.FormatFloat(p.TS, 'g', -1, 64) + ":" + strconv.FormatFloat(p.RPS, 'g', -1, 64)
		}
		add("rate_curve", strings.Join(pts, ","))
	}
	add("limit", strconv.Itoa(w.Limit))
	add("users", strconv.Itoa(w.Users))
	add("policy", w.Benchmark.Policy)
	detail := map[string]string{"fpm": p.FPMName, "scenario": sc.Name}
	if p.HostName != "" {
		detail["host"] = p.HostName
	}
	if v := sc.Engine.VLLMVersion; v != "" {
		detail[datasets.DetailVLLMVersion] = v
	}
	// The dataset is named after its directory (the writer fills Name);
	// the scenario's name is provenance.
	m := datasets.Manifest{
		Tool:   datasets.Tool{Name: "steplab", Version: "dev", Command: command},
		Source: datasets.Source{Kind: "simulate", Format: "sim", Detail: detail},
		Hardware: &datasets.Hardware{GPUName: p.HW.Name, GPUCount: max(1, p.Shape.TP), MemTotalBytes: int64(p.HW.MemBytes()),
			Simulated: true, Spec: specFile(p.HW)},
		Model: manifest.ModelSection(p.Shape),
		Engine: &datasets.EngineConfig{MaxNumSeqs: p.Sched.MaxNumSeqs, MaxNumBatchedTokens: p.Sched.MaxNumBatchedTokens,
			BlockSize: p.Sched.BlockSize, NumGPUBlocks: p.Sched.NumGPUBlocks, MaxModelLen: p.Sched.MaxModelLen,
			ChunkedPrefill: p.Sched.ChunkedPrefill, PrefixCaching: p.Sched.PrefixCaching,
			LongPrefillTokenThreshold: p.Sched.LongPrefillTokenThreshold, AsyncScheduling: p.Async, BatchQueueDepth: depthOf(p.Async),
			WorkerCount: 1, GPUMemoryUtilization: sc.Engine.GPUMemoryUtilization},
		CUDAGraphSizes: p.Graphs,
		Workload:       &datasets.Workload{Kind: w.Kind, Params: params, Seed: sc.Seed, InputSHA256: inputSHA},
		// What priced the steps, where that was chosen (an ops database)
		// or borrowed (a host model from the FPM's artifact).
		Notes: slices.Clone(p.Notes),
	}
	if w.Kind == "benchmark" {
		pol := w.Benchmark.Policy
		if pol == "" {
			pol = datasets.PolicySteadyStateSecondStep
		}
		m.MeasurementPolicy = &datasets.MeasurementPolicy{Decode: pol, Prefill: datasets.PolicySingleStep}
	} else {
		m.MeasurementPolicy = &datasets.MeasurementPolicy{Decode: datasets.PolicyProduction, Prefill: datasets.PolicyProduction}
	}
	return m
}

// specFile is the spec file a hardware came from, "" for a built-in
// entry: the manifest names it so the plan can be rebuilt.
func specFile(h catalog.Hardware) string {
	if strings.HasPrefix(h.File, "builtin:") {
		return ""
	}
	return h.File
}

func depthOf(async bool) int {
	if async {
		return 2
	}
	return 1
}

// ManifestOptions choose the models a recorded run is re-priced with.
type ManifestOptions struct {
	// FPM is the forward-pass model spec ("" or "roofline": the prior of
	// the recorded hardware and model).
	FPM string
	// Host is the host-model spec ("": the FPM artifact's params.host or
	// the default prior).
	Host string
}

// PlanFromManifest rebuilds the engine a dataset ran on from its manifest:
// the inverse of Plan.Manifest. What the manifest does not record takes
// DefaultScenario's value, each such default a warning. A recorded
// num_gpu_blocks always wins over the estimate from GPU memory; a recorded
// layer shape wins over the catalogue's shape of the model's name.
func PlanFromManifest(m *datasets.Manifest, o ManifestOptions) (*Plan, []string, error) {
	if m == nil {
		m = &datasets.Manifest{}
	}
	sc := DefaultScenario()
	sc.Name, sc.FPM, sc.Host = m.Name, o.FPM, o.Host
	if m.Workload != nil {
		sc.Seed = m.Workload.Seed
	}
	var warn []string
	e := &sc.Engine
	e.VLLMVersion = m.Source.Detail[datasets.DetailVLLMVersion]
	if me := m.Engine; me == nil {
		warn = append(warn, fmt.Sprintf("manifest has no engine section: default engine limits (max_num_seqs %d, max_num_batched_tokens %d, block %d, async)",
			e.MaxNumSeqs, e.MaxNumBatchedTokens, e.BlockSize))
	} else {
		set := func(dst *int, v int, name string) {
			if v > 0 {
				*dst = v
			} else {
				warn = append(warn, fmt.Sprintf("engine.%s not recorded: default %d", name, *dst))
			}
		}
		set(&e.MaxNumSeqs, me.MaxNumSeqs, "max_num_seqs")
		set(&e.MaxNumBatchedTokens, me.MaxNumBatchedTokens, "max_num_batched_tokens")
		set(&e.BlockSize, me.BlockSize, "block_size")
		set(&e.MaxModelLen, me.MaxModelLen, "max_model_len")
		e.ChunkedPrefill, e.PrefixCaching, e.LongPrefillTokenThreshold = me.ChunkedPrefill, me.PrefixCaching, me.LongPrefillTokenThreshold
		e.AsyncScheduling, e.NumGPUBlocks = me.AsyncScheduling, me.NumGPUBlocks
		if me.GPUMemoryUtilization > 0 {
			e.GPUMemoryUtilization = me.GPUMemoryUtilization
		}
	}
	if len(m.CUDAGraphSizes) > 0 {
		e.CUDAGraphSizes = m.CUDAGraphSizes
	} else {
		warn = append(warn, fmt.Sprintf("cuda_graph_capture_sizes not recorded: vLLM defaults up to %d", e.CUDAGraphSizes[len(e.CUDAGraphSizes)-1]))
	}

	r := manifest.Resolve(m)
	if e.NumGPUBlocks <= 0 {
		if !r.Known() {
			// Without a capacity the replay runs without KV pressure, which
			// the record may well have had: say so.
			e.NumGPUBlocks = 1 + (e.MaxModelLen/e.BlockSize+1)*e.MaxNumSeqs
			warn = append(warn, fmt.Sprintf("num_gpu_blocks not recorded and the KV capacity cannot be estimated (%v): %d blocks (no KV pressure)",
				r.Err(), e.NumGPUBlocks))
		} else {
			n, err := catalog.KVBlocks(r.HW, r.Shape, e.BlockSize, e.GPUMemoryUtilization, 0)
			if err != nil {
				return nil, warn, err
			}
			e.NumGPUBlocks = n
			warn = append(warn, fmt.Sprintf("num_gpu_blocks not recorded: %d estimated from %s memory, the %s weights and gpu_memory_utilization %g",
				n, r.HW.Name, r.Shape.Name, e.GPUMemoryUtilization))
		}
	}
	if kvMax := (e.NumGPUBlocks - 1) * e.BlockSize; e.MaxModelLen > kvMax {
		warn = append(warn, fmt.Sprintf("max_model_len %d exceeds the KV capacity of %d tokens: replayed at %d", e.MaxModelLen, kvMax, kvMax))
		e.MaxModelLen = kvMax
	}
	sc.Hardware, sc.Model = r.HW.Name, r.Shape.Name
	p, err := sc.planOn(r)
	if err != nil {
		return nil, warn, err
	}
	return p, append(warn, p.Notes...), nil
}
