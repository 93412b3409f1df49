package scenario

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/catalog/manifest"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/internal/yamldoc"
	"github.com/steplab/steplab/pricing"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/cluster"
)

// ManifestOptions choose the models a recorded run is re-priced with, and
// state what its manifest does not record.
type ManifestOptions struct {
	// FPM is the forward-pass model spec ("" or "roofline": the prior of
	// the recorded hardware and model).
	FPM string
	// Host is the host-model spec ("": the FPM artifact's params.host or
	// the default prior).
	Host string
	// Spec fills in the placement: the router of a data-parallel run, the
	// links, engine keys the manifest does not record, or the pools of a
	// what-if for a one-engine run. The pools a manifest records win over
	// Spec's.
	Spec *Spec
}

// PlanFromManifest rebuilds the engines a dataset ran on: the inverse of
// Plan.Manifest, and for an imported run the placement its engine section
// records (vLLM's data_parallel_size and enable_expert_parallel, read
// from the engine section, else from the import's source details). Each
// pool's engine is engineFromManifest of the manifest (with the pool's
// engine section and GPU), so the GPU and the model, its experts
// included, are the recorded ones or the catalogue's. A data-parallel run
// becomes that many engines behind vLLM's DP load balancer (router
// vllm_dp, unless Spec names another), stepping together as one
// expert-parallel instance when its experts were shared; a model without
// routed experts is then refused rather than replayed dense. What is
// assumed is returned as warnings.
func PlanFromManifest(m *datasets.Manifest, o ManifestOptions) (*Plan, []string, error) {
	if m == nil {
		m = &datasets.Manifest{}
	}
	spec := Spec{}
	if o.Spec != nil {
		spec = *o.Spec
	}
	var warn []string
	pools, router, links, dp := placementOf(m, spec, &warn)
	spec.Pools, spec.Router, spec.Links = pools, router, links
	if err := spec.check(); err != nil {
		return nil, warn, err
	}
	p := &Plan{Plan: &cluster.Plan{Router: spec.Router}}
	slo := recordedSLO(m)
	for k, ps := range spec.pools() {
		psc, sp, full, pw, err := poolFromManifest(m, ps, spec, o)
		if err != nil {
			if dp > 1 && errors.Is(err, errNoExperts) {
				return nil, warn, fmt.Errorf("the manifest records data_parallel_size %d with expert parallelism, but %w", dp, err)
			}
			return nil, warn, fmt.Errorf("pool %s: %w", ps.Name, err)
		}
		if k == 0 {
			warn = append(warn, pw...)
			psc.Cluster, psc.SLO = spec, slo
			p.Scenario = psc
			p.Plan = psc.clusterOf(spec.Router, full)
		}
		scaling, n := scalingOf(ps, slo)
		p.Pools = append(p.Pools, &cluster.PoolPlan{Name: ps.Name, Role: roleOf(ps), Replicas: n, ExpertParallel: ps.ExpertParallel, Engine: sp, Scaling: scaling})
		p.EngineBlocks = append(p.EngineBlocks, psc.Engine)
	}
	if err := resolve(p.Plan, spec.Links); err != nil {
		return nil, warn, err
	}
	for _, pp := range p.Pools {
		if n := expertPricingNote(pp); n != "" {
			warn = append(warn, n)
		}
	}
	return p, warn, nil
}

// errNoExperts marks expert parallelism asked of a model without routed
// experts.
var errNoExperts = errors.New("no routed experts")

// poolFromManifest rebuilds one pool's engine: engineFromManifest of the
// pool's manifest, re-planned on catalog.DenseShape in an expert-parallel
// pool (whose KV capacity, unless recorded, is what one GPU holds beside
// its share of the experts) and with the placement's engine keys set over
// what the manifest recorded. sc is the pool's scenario and full the
// whole model.
func poolFromManifest(m *datasets.Manifest, ps PoolSpec, spec Spec, o ManifestOptions) (sc Scenario, sp *sim.Plan, full catalog.Shape, warn []string, err error) {
	pm := poolManifest(m, ps)
	ep := ps.ExpertParallel > 1
	if ep && (pm.Engine == nil || pm.Engine.NumGPUBlocks == 0) {
		n, note, err := expertKVBlocks(pm, ps)
		if err != nil {
			return sc, nil, full, nil, err
		}
		e := datasets.EngineConfig{}
		if pm.Engine != nil {
			e = *pm.Engine
		}
		e.NumGPUBlocks = n
		pm.Engine, warn = &e, append(warn, note)
	}
	sc, sp, pw, err := engineFromManifest(pm, o)
	if err != nil {
		return sc, nil, full, nil, err
	}
	full = sp.Shape
	if ep && full.MoE.Experts == 0 {
		return sc, nil, full, nil, fmt.Errorf("model %s has %w: check its name or config.json", full.Name, errNoExperts)
	}
	warn = append(warn, pw...)
	if !ep && spec.Engine.IsZero() && ps.Engine.IsZero() {
		return sc, sp, full, warn, nil
	}
	for _, n := range []struct {
		keys yamldoc.Partial[EngineSpec]
		at   string
	}{{spec.Engine, "cluster.engine"}, {ps.Engine, "cluster.pools." + ps.Name + ".engine"}} {
		if err := n.keys.Over(&sc.Engine); err != nil {
			return sc, nil, full, nil, fmt.Errorf("%s: %v", n.at, err)
		}
		for _, kv := range n.keys.Keys() {
			warn = append(warn, fmt.Sprintf("engine.%s set to %s by the placement, over the manifest", kv[0], kv[1]))
		}
	}
	shape := full
	if ep {
		shape = catalog.DenseShape(full)
	}
	sp, err = sc.planOn(sp.HW, shape, false)
	return sc, sp, full, warn, err
}

// expertKVBlocks is the KV capacity of one GPU of an expert-parallel pool
// whose manifest does not record it, and the note that says so.
func expertKVBlocks(pm *datasets.Manifest, ps PoolSpec) (int, string, error) {
	pr, err := pricing.FromManifest(pm, pricing.FPMRoofline, "")
	if err != nil {
		return 0, "", err
	}
	if pr.Shape.MoE.Experts == 0 {
		return 0, "", fmt.Errorf("model %s has %w: check its name or config.json", pr.Shape.Name, errNoExperts)
	}
	d := Default().Engine
	util, bs := d.GPUMemoryUtilization, d.BlockSize
	if e := pm.Engine; e != nil && e.GPUMemoryUtilization > 0 {
		util = e.GPUMemoryUtilization
	}
	if e := pm.Engine; e != nil && e.BlockSize > 0 {
		bs = e.BlockSize
	}
	gpus := ps.ExpertParallel * max(1, pr.Shape.TP)
	n, err := catalog.KVBlocks(pr.HW, pr.Shape, bs, util, ps.ExpertParallel)
	if err != nil {
		return 0, "", err
	}
	return n, fmt.Sprintf("num_gpu_blocks not recorded: %d estimated from %s memory, the dense weights, the %d experts' share over %d GPUs and gpu_memory_utilization %g",
		n, pr.HW.Name, pr.Shape.MoE.Experts, gpus, util), nil
}

// placementOf reads the pools, router and links a manifest records, with
// spec's where the manifest is silent; dp is the data-parallel size the
// pools were made from (0: none).
func placementOf(m *datasets.Manifest, spec Spec, warn *[]string) (pools Pools, router cluster.RouterSpec, links cluster.Links, dp int) {
	router, links = spec.Router, spec.Links
	if c := m.Cluster; c != nil {
		if router.Name == "" {
			router.Name = c.Router
		}
		if c.KVTransfer != nil && links.KVTransfer.BandwidthGBs == nil {
			links.KVTransfer = linkSpec(*c.KVTransfer)
		}
		for _, cp := range c.Pools {
			ps := PoolSpec{Name: cp.Name, Role: cp.Role, Replicas: cp.Replicas, ExpertParallel: cp.ExpertParallel, Hardware: cp.Hardware}
			if cp.Autoscale != nil { // the planner runs again
				ps.Autoscale = specOf(cp.Autoscale)
			}
			pools = append(pools, ps)
			// An instance across nodes took the hardware's links, which
			// the plan finds again; a stated link was one link.
			if cp.ExpertLink != nil && cp.ExpertNodes == nil && links.Expert.BandwidthGBs == nil {
				links.Expert = linkSpec(*cp.ExpertLink)
			}
		}
		return pools, router, links, 0
	}
	dp, ep := dataParallel(m)
	if dp <= 1 {
		return spec.Pools, router, links, 0 // one engine, or the placement's what-if
	}
	if router.Name == "" {
		router.Name = cluster.RouterVLLMDP
	}
	ps := PoolSpec{Name: "dp", Role: cluster.RoleBoth, Replicas: dp}
	how := "independent engines"
	if ep {
		ps.ExpertParallel = dp
		how = "one data-parallel + expert-parallel instance"
	}
	*warn = append(*warn, fmt.Sprintf("data_parallel_size %d: %d engines as %s behind router %s", dp, dp, how, router.Name))
	return Pools{ps}, router, links, dp
}

// recordedSLO is the objective an autoscaled pool's slo policy kept
// headroom to, as its manifest records it (none: zero).
func recordedSLO(m *datasets.Manifest) cluster.SLOSpec {
	if m.Cluster != nil {
		for _, cp := range m.Cluster.Pools {
			if a := cp.Autoscale; a != nil && (a.SLOTTFTMs > 0 || a.SLOITLMs > 0) {
				return cluster.SLOSpec{TTFTMs: a.SLOTTFTMs, ITLMs: a.SLOITLMs}
			}
		}
	}
	return cluster.SLOSpec{}
}

// dataParallel is the run's data-parallel size and expert parallelism:
// the engine section's, else the import's source details.
func dataParallel(m *datasets.Manifest) (int, bool) {
	if e := m.Engine; e != nil && e.DataParallelSize > 0 {
		return e.DataParallelSize, e.ExpertParallel
	}
	d := m.Source.Detail
	dp, _ := strconv.Atoi(d["data_parallel_size"])
	ep, _ := strconv.ParseBool(d["enable_expert_parallel"])
	return dp, ep
}

func linkSpec(l datasets.Link) cluster.LinkSpec {
	bw, lat := l.BandwidthGBs, l.LatencyUs
	return cluster.LinkSpec{BandwidthGBs: &bw, LatencyUs: &lat}
}

// poolManifest is the manifest one pool's engine is rebuilt from: the
// pool's own engine section and GPU where the cluster records them.
func poolManifest(m *datasets.Manifest, ps PoolSpec) *datasets.Manifest {
	pm := *m
	if c := m.Cluster; c != nil {
		for _, cp := range c.Pools {
			if cp.Name == ps.Name && cp.Engine != nil {
				e := *cp.Engine
				pm.Engine = &e
			}
		}
	}
	if ps.Hardware != "" && pm.Hardware != nil {
		h := *pm.Hardware
		h.GPUName, h.Spec = ps.Hardware, ""
		pm.Hardware = &h
	}
	return &pm
}

// engineFromManifest rebuilds one engine a dataset ran on from its
// manifest, and the scenario of it: the inverse of engineManifest. What
// the manifest does not record takes Default's value, each such default
// a warning. A recorded num_gpu_blocks always wins over the estimate from
// GPU memory; a recorded layer shape wins over the catalogue's shape of
// the model's name.
func engineFromManifest(m *datasets.Manifest, o ManifestOptions) (Scenario, *sim.Plan, []string, error) {
	sc := Default()
	sc.Name, sc.FPM, sc.Host = m.Name, o.FPM, o.Host
	if m.Workload != nil {
		sc.Seed = m.Workload.Seed
	}
	var warn []string
	e := &sc.Engine
	e.VLLMVersion = m.Source.Detail[datasets.DetailVLLMVersion]
	e.AttentionBackend = m.Source.Detail[datasets.DetailAttentionBackend]
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
		e.SerialWorker = m.SerialWorker()
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
				return sc, nil, warn, err
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
	p, err := sc.planEngine(r)
	if err != nil {
		return sc, nil, warn, err
	}
	return sc, p, append(warn, p.Notes...), nil
}
