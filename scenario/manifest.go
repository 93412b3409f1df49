package scenario

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/catalog/manifest"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/cluster"
)

// Manifest is the provenance of the plan's dataset: simulate's for one
// engine; beyond, the whole model (experts and all) and the placement
// (pools, router, links).
//
// PlanFromManifest is its inverse: hardware, model, FPM and host specs,
// limits, KV capacity, CUDA graphs, async mode and placement come back as
// they went.
func (p *Plan) Manifest(command []string, inputSHA string) datasets.Manifest {
	m := engineManifest(p.Scenario, p.EngineBlocks[0], p.Engine(), command, inputSHA)
	if p.Single() {
		return m
	}
	m.Model = manifest.ModelSection(p.Shape)
	c := &datasets.Cluster{Router: p.Router.Name, Sequential: p.SequentialReason()}
	if p.Disaggregated() {
		c.KVTransfer = linkOf(p.KVLink)
	}
	for i, pp := range p.Pools {
		cp := datasets.ClusterPool{Name: pp.Name, Role: pp.Role, Replicas: pp.Replicas, ExpertParallel: pp.ExpertParallel,
			Engine: engineSection(pp.Engine, p.EngineBlocks[i])}
		if hw := pp.Engine.HW; hw.Name != m.Hardware.GPUName {
			cp.Hardware = cmp.Or(specFile(hw), hw.Name) // a spec file: found again by its path
		}
		if pp.ExpertParallel > 1 {
			cp.ExpertLink, cp.ExpertNodes = linkOf(pp.ExpertLink), nodesOf(pp.ExpertLayout)
		}
		for r := 0; r < pp.Replicas; r++ {
			cp.Workers = append(cp.Workers, fmt.Sprintf("%s-%d", pp.Name, r))
		}
		c.Pools = append(c.Pools, cp)
	}
	m.Cluster = c
	m.Hardware.GPUCount = p.GPUs()
	m.Engine.WorkerCount = p.Engines()
	return m
}

func linkOf(l cluster.Link) *datasets.Link {
	return &datasets.Link{BandwidthGBs: l.BytesPerSec / 1e9, LatencyUs: l.LatencyNs / 1e3}
}

// nodesOf records a layout that spans nodes (nil on one node).
func nodesOf(l catalog.Layout) *datasets.Nodes {
	if !l.MultiNode() {
		return nil
	}
	link := func(i catalog.Interconnect) datasets.NodeLink {
		return datasets.NodeLink{Kind: i.Kind, BandwidthGBs: i.GBsPerDirection, LatencyUs: i.LatencyUs}
	}
	return &datasets.Nodes{Nodes: l.Nodes, GPUsPerNode: l.GPUsPerNode, Link: link(l.Link), Network: link(l.Network)}
}

// tpNodes is the layout of a TP group of shape s on hw where it spans
// nodes (nil on one node, or where hw cannot lay it out).
func tpNodes(hw catalog.Hardware, s catalog.Shape) *datasets.Nodes {
	l, err := hw.Layout(s.TPDegree())
	if err != nil {
		return nil
	}
	return nodesOf(l)
}

// engineManifest is the manifest of one engine p, planned from the
// engine block e of scenario sc: what a cluster of one records.
func engineManifest(sc Scenario, e EngineSpec, p *sim.Plan, command []string, inputSHA string) datasets.Manifest {
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
	if v := e.VLLMVersion; v != "" {
		detail[datasets.DetailVLLMVersion] = v
	}
	if v := e.AttentionBackend; v != "" {
		detail[datasets.DetailAttentionBackend] = v
	}
	// The dataset is named after its directory (the writer fills Name);
	// the scenario's name is provenance.
	m := datasets.Manifest{
		Tool:   datasets.Tool{Name: "steplab", Version: "dev", Command: command},
		Source: datasets.Source{Kind: "simulate", Format: "sim", Detail: detail},
		Hardware: &datasets.Hardware{GPUName: p.HW.Name, GPUCount: max(1, p.Shape.TP), MemTotalBytes: int64(p.HW.MemBytes()),
			Simulated: true, Spec: specFile(p.HW), Nodes: tpNodes(p.HW, p.Shape)},
		Model:          manifest.ModelSection(p.Shape),
		Engine:         engineSection(p, e),
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

// engineSection is the engine section of engine p, planned from the
// engine block e.
func engineSection(p *sim.Plan, e EngineSpec) *datasets.EngineConfig {
	return &datasets.EngineConfig{MaxNumSeqs: p.Sched.MaxNumSeqs, MaxNumBatchedTokens: p.Sched.MaxNumBatchedTokens,
		BlockSize: p.Sched.BlockSize, NumGPUBlocks: p.Sched.NumGPUBlocks, MaxModelLen: p.Sched.MaxModelLen,
		ChunkedPrefill: p.Sched.ChunkedPrefill, PrefixCaching: p.Sched.PrefixCaching,
		LongPrefillTokenThreshold: p.Sched.LongPrefillTokenThreshold, AsyncScheduling: p.Async, BatchQueueDepth: depthOf(p.Async),
		WorkerCount: 1, GPUMemoryUtilization: e.GPUMemoryUtilization, SerialWorker: p.SerialWorker}
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
