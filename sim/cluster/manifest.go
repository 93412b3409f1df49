package cluster

import (
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/model"
	"github.com/steplab/steplab/sim"
)

// ManifestOptions choose the models a recorded run is re-priced with, and
// state what its manifest and the catalogue do not know.
type ManifestOptions struct {
	// FPM and Host are sim.ManifestOptions' model specs.
	FPM, Host string
	// Spec fills in the placement: an inline GPU (hardware_spec) and model
	// (model_spec, with its MoE layout) the catalogue does not know, the
	// links, and the router of a data-parallel run. The pools a manifest
	// records win over Spec's.
	Spec *Spec
}

// PlanFromManifest rebuilds the engines a dataset ran on: the inverse of
// Plan.Manifest, and for an imported run the placement its engine section
// records (vLLM's data_parallel_size and enable_expert_parallel, read
// from the engine section, else from the import's source details). A
// data-parallel run becomes that many engines behind vLLM's DP load
// balancer (router vllm_dp, unless Spec names another), stepping together
// as one expert-parallel instance when its experts were shared. A run
// with expert parallelism whose MoE layout nobody states is refused.
// What is assumed is returned as warnings.
func PlanFromManifest(m *datasets.Manifest, o ManifestOptions) (*Plan, []string, error) {
	if m == nil {
		m = &datasets.Manifest{}
	}
	spec := Spec{}
	if o.Spec != nil {
		spec = *o.Spec
	}
	var warn []string
	pools, router, moe, links, err := placementOf(m, spec, &warn)
	if err != nil {
		return nil, warn, err
	}
	spec.Pools, spec.Router, spec.Links, spec.MoE = pools, router, links, moe
	if err := spec.check(); err != nil {
		return nil, warn, err
	}
	so := sim.ManifestOptions{FPM: o.FPM, Host: o.Host}
	if h := spec.HardwareSpec; h != nil {
		hw := h.Hardware()
		if err := hw.Validate(); err != nil {
			return nil, warn, fmt.Errorf("cluster.hardware_spec: %w", err)
		}
		so.Hardware = &hw
	}
	full, err := fullShape(m, spec, so)
	if err != nil {
		return nil, warn, err
	}
	mm := *m
	switch {
	case moe != nil:
		dense := moe.DenseShape(full)
		so.Shape = &dense
	case spec.ModelSpec != nil:
		so.Shape = &full
	}
	p := &Plan{Router: spec.Router, Shape: full, MoE: moe, KVBytesPerToken: full.KVBytesPerToken()}
	for k, ps := range spec.pools() {
		pm, err := poolManifest(&mm, ps, moe, full, so, &warn)
		if err != nil {
			return nil, warn, err
		}
		sp, pw, err := sim.PlanFromManifest(pm, so)
		if err != nil {
			return nil, warn, fmt.Errorf("pool %s: %w", ps.Name, err)
		}
		if sp, err = overridden(sp, spec.Engine, ps.Engine, &warn, k == 0); err != nil {
			return nil, warn, err
		}
		if k == 0 {
			warn = append(warn, pw...)
		}
		p.Pools = append(p.Pools, &PoolPlan{Name: ps.Name, Role: roleOf(ps), Replicas: ps.Replicas, ExpertParallel: ps.ExpertParallel, Engine: sp})
	}
	p.Scenario = Scenario{Scenario: p.Pools[0].Engine.Scenario, Cluster: spec}
	if s, ok, err := ScalesOf(p.Pools[0].Engine.Artifact); err != nil {
		return nil, warn, fmt.Errorf("fpm: %w", err)
	} else if ok {
		p.Scales = s
	}
	if err := p.finish(spec.Links); err != nil {
		return nil, warn, err
	}
	return p, warn, nil
}

// overridden re-plans an engine with the placement's engine keys set
// over what the manifest recorded, saying so.
func overridden(sp *sim.Plan, all, own yaml.Node, warn *[]string, say bool) (*sim.Plan, error) {
	if all.Kind == 0 && own.Kind == 0 {
		return sp, nil
	}
	sc := sp.Scenario
	if err := overrideEngine(&sc.Engine, all, "cluster.engine"); err != nil {
		return nil, err
	}
	if err := overrideEngine(&sc.Engine, own, "cluster.pools.engine"); err != nil {
		return nil, err
	}
	if say {
		for _, n := range []yaml.Node{all, own} {
			for i := 0; i+1 < len(n.Content); i += 2 {
				*warn = append(*warn, fmt.Sprintf("engine.%s set to %s by the placement, over the manifest", n.Content[i].Value, n.Content[i+1].Value))
			}
		}
	}
	return sc.EnginePlanOn(sp.HW, sp.Shape)
}

// placementOf reads the pools, router, experts and links a manifest
// records, with spec's where the manifest is silent.
func placementOf(m *datasets.Manifest, spec Spec, warn *[]string) (Pools, RouterSpec, *MoE, Links, error) {
	router, links, moe := spec.Router, spec.Links, spec.moe()
	if c := m.Cluster; c != nil {
		if router.Name == "" {
			router.Name = c.Router
		}
		if moe == nil && c.MoE != nil {
			moe = &MoE{Experts: c.MoE.Experts, TopK: c.MoE.TopK, ExpertIntermediate: c.MoE.ExpertIntermediate,
				SharedIntermediate: c.MoE.SharedIntermediate}
		}
		if c.KVTransfer != nil && links.KVTransfer.BandwidthGBs == nil {
			links.KVTransfer = linkSpec(*c.KVTransfer)
		}
		var pools Pools
		for _, cp := range c.Pools {
			pools = append(pools, PoolSpec{Name: cp.Name, Role: cp.Role, Replicas: cp.Replicas, ExpertParallel: cp.ExpertParallel,
				Hardware: cp.Hardware})
			if cp.ExpertLink != nil && links.Expert.BandwidthGBs == nil {
				links.Expert = linkSpec(*cp.ExpertLink)
			}
		}
		return pools, router, moe, links, nil
	}
	dp, ep := dataParallel(m)
	if dp <= 1 {
		return spec.Pools, router, moe, links, nil // one engine, or the placement's what-if
	}
	if ep && moe == nil {
		return nil, router, nil, links, fmt.Errorf("the manifest records data_parallel_size %d with expert parallelism, but the model's expert layout is unknown: state it (cluster.moe or model_spec.moe: experts, top_k, expert_intermediate) so the run is not replayed as a dense engine", dp)
	}
	if router.Name == "" {
		router.Name = RouterVLLMDP
	}
	ps := PoolSpec{Name: "dp", Role: RoleBoth, Replicas: dp}
	how := "independent engines"
	if ep {
		ps.ExpertParallel = dp
		how = "one data-parallel + expert-parallel instance"
	}
	*warn = append(*warn, fmt.Sprintf("data_parallel_size %d: %d engines as %s behind router %s", dp, dp, how, router.Name))
	return Pools{ps}, router, moe, links, nil
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

func linkSpec(l datasets.Link) LinkSpec {
	bw := l.BandwidthGBs
	return LinkSpec{BandwidthGBs: &bw, LatencyUs: l.LatencyUs}
}

// fullShape is the whole model: the inline spec, else what the manifest
// and the catalogue say.
func fullShape(m *datasets.Manifest, spec Spec, so sim.ManifestOptions) (model.Shape, error) {
	if s := spec.ModelSpec; s != nil {
		sh := s.Shape()
		if err := sh.Validate(); err != nil {
			return sh, fmt.Errorf("cluster.model_spec: %w", err)
		}
		return sh, nil
	}
	pr, err := sim.PricingFromManifest(m, sim.ManifestOptions{Hardware: so.Hardware, FPM: sim.FPMRoofline})
	if err != nil {
		return model.Shape{}, err
	}
	sh := pr.Shape
	if m.Model != nil && m.Model.Intermediate > 0 {
		sh.Intermediate = m.Model.Intermediate
	}
	return sh, nil
}

// poolManifest is the manifest one pool's engine is rebuilt from: the
// pool's own engine section where the cluster records one, and for an MoE
// model without a recorded capacity, the KV blocks left beside its share
// of the experts.
func poolManifest(m *datasets.Manifest, ps PoolSpec, moe *MoE, full model.Shape, so sim.ManifestOptions, warn *[]string) (*datasets.Manifest, error) {
	pm := *m
	if m.Engine != nil {
		e := *m.Engine
		pm.Engine = &e
	}
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
		h.GPUName = ps.Hardware
		pm.Hardware = &h
	}
	if moe == nil || pm.Engine == nil || pm.Engine.NumGPUBlocks > 0 {
		return &pm, nil
	}
	pr, err := sim.PricingFromManifest(&pm, sim.ManifestOptions{Hardware: so.Hardware, Shape: so.Shape, FPM: sim.FPMRoofline})
	if err != nil {
		return &pm, nil // the engine's planner says what is missing
	}
	util := pm.Engine.GPUMemoryUtilization
	if util == 0 {
		util = sim.DefaultScenario().Engine.GPUMemoryUtilization
	}
	bs := pm.Engine.BlockSize
	if bs == 0 {
		bs = sim.DefaultScenario().Engine.BlockSize
	}
	gpus := max(1, ps.ExpertParallel) * max(1, full.TP)
	n, err := moeKVBlocks(*moe, full, pr.HW, gpus, bs, util)
	if err != nil {
		return nil, fmt.Errorf("pool %s: %w", ps.Name, err)
	}
	pm.Engine.NumGPUBlocks = n
	*warn = append(*warn, fmt.Sprintf("num_gpu_blocks not recorded: %d estimated from %s memory, the dense weights, %d experts' share over %d GPUs and gpu_memory_utilization %g",
		n, pr.HW.Name, moe.Experts, gpus, util))
	return &pm, nil
}
