package cluster

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/steplab/steplab/internal/yamldoc"
	"github.com/steplab/steplab/sim"
)

// Pool roles (PoolSpec.Role).
const (
	RoleBoth    = "both"    // aggregated: a request prefills and decodes on one engine
	RolePrefill = "prefill" // disaggregated: prefills only (max_tokens = 1)
	RoleDecode  = "decode"  // disaggregated: decodes from a transferred prompt KV
)

// DefaultPool is the name of the pool of a scenario that names none: one
// engine, which simulate has always called sim-0.
const DefaultPool = "sim"

// Scenario is a simulate scenario with a placement: the engine, model and
// workload of sim.Scenario, and the cluster the engines form. A scenario
// without a cluster block is one engine, exactly as simulate runs it.
type Scenario struct {
	sim.Scenario `yaml:",inline"`
	Cluster      Spec `yaml:"cluster"`
	// SLO, when set, is the objective a run reports its attainment of
	// (and an autoscale policy slo keeps headroom to).
	SLO SLOSpec `yaml:"slo"`
}

// SLOSpec is a latency objective on every request: TTFT and mean
// inter-token latency (0: none on that metric).
type SLOSpec struct {
	TTFTMs float64 `yaml:"ttft_ms"`
	ITLMs  float64 `yaml:"itl_ms"`
}

// Spec is a placement: pools of engines, the router in front of them and
// the links between GPUs. The GPU and the model, experts and all, are the
// scenario's hardware and model (catalogue names, a hardware spec file, a
// config.json).
type Spec struct {
	// Pools in document order (a mapping of name to pool in YAML). None:
	// one aggregated engine.
	Pools Pools `yaml:"pools"`
	// Router picks the engine of each request (RouterNames).
	Router RouterSpec `yaml:"router"`
	// Links price what crosses GPUs: prompt KV from a prefill to a decode
	// engine, and the all-to-all of expert parallelism.
	Links Links `yaml:"links"`
	// Engine sets engine keys (simulate's engine block) for every pool,
	// before each pool's own engine keys: in a placement file, what a
	// recorded run's manifest does not record.
	Engine yamldoc.Partial[sim.EngineSpec] `yaml:"engine"`
}

// PoolSpec is a group of identical engines with one role.
type PoolSpec struct {
	Name string `yaml:"-"` // the key of the pools mapping
	// Role: both (default), prefill or decode.
	Role string `yaml:"role"`
	// Replicas is the number of engines (each its own scheduler, KV cache
	// and worker; one data-parallel rank each).
	Replicas int `yaml:"replicas"`
	// ExpertParallel groups this many engines into one data-parallel +
	// expert-parallel instance: they step together and share the routed
	// experts of the model's MoE layers (vLLM data_parallel_size with
	// enable_expert_parallel). 0 or 1: every engine holds the whole model
	// and steps alone.
	ExpertParallel int `yaml:"expert_parallel"`
	// Hardware overrides the scenario's GPU for this pool: a catalogue
	// name or a hardware spec file.
	Hardware string `yaml:"hardware"`
	// Engine overrides keys of the scenario's engine block for this pool
	// (max_num_seqs, num_gpu_blocks, ...).
	Engine yamldoc.Partial[sim.EngineSpec] `yaml:"engine"`
	// Autoscale, when set, lets a planner change the pool's engines during
	// the run (Replicas is then the count it starts with).
	Autoscale *AutoscaleSpec `yaml:"autoscale"`
}

// Pools is the pools mapping, kept in document order. Decoding a mapping
// over existing pools (a --set) updates the pools it names and appends
// new ones.
type Pools []PoolSpec

// UnmarshalYAML reads name: {role, replicas, ...} in document order.
func (ps *Pools) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: cluster.pools is a mapping of pool name to {role, replicas, ...}", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		j := ps.index(k.Value)
		if j < 0 {
			*ps = append(*ps, PoolSpec{Name: k.Value})
			j = len(*ps) - 1
		}
		p := &(*ps)[j]
		if err := v.Decode(p); err != nil {
			return fmt.Errorf("cluster.pools.%s: %v", k.Value, err)
		}
		p.Name = k.Value
	}
	return nil
}

func (ps Pools) index(name string) int {
	for i := range ps {
		if ps[i].Name == name {
			return i
		}
	}
	return -1
}

// MarshalYAML writes the pools back as a mapping.
func (ps Pools) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, p := range ps {
		var v yaml.Node
		if err := v.Encode(p); err != nil {
			return nil, err
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: p.Name}, &v)
	}
	return n, nil
}

// RouterSpec names the router and its parameters.
type RouterSpec struct {
	// Name: round_robin (default), least_requests, least_kv, session, kv,
	// vllm_dp.
	Name string `yaml:"name"`
	// OverlapWeight (kv) weighs the prefill blocks a worker would compute
	// against its decode blocks: Dynamo's kv_overlap_score_weight, default 1.
	OverlapWeight *float64 `yaml:"overlap_weight"`
	// Temperature (kv) of the softmax over normalised logits: Dynamo's
	// router_temperature, default 0 (the lowest cost wins).
	Temperature float64 `yaml:"temperature"`
	// SessionTokens (session) is the prompt depth whose prefix hash keys a
	// request's session when the trace has no session key; default 1024.
	SessionTokens int `yaml:"session_tokens"`
	// StatsIntervalMs (vllm_dp) is how often the engines' queue counts
	// reach the router: vLLM's coordinator publishes every 100 ms.
	StatsIntervalMs *float64 `yaml:"stats_interval_ms"`
}

// Links are the links between GPUs a placement uses. Each defaults to the
// hardware's GPU-to-GPU interconnect (DefaultLink).
type Links struct {
	// KVTransfer carries a prompt's KV from a prefill engine to a decode
	// engine.
	KVTransfer LinkSpec `yaml:"kv_transfer"`
	// Expert carries the all-to-all of expert parallelism between the
	// ranks of an instance.
	Expert LinkSpec `yaml:"expert"`
}

// LinkSpec is one link: bandwidth per direction and one-way latency. What
// it leaves out is the hardware interconnect's (see DefaultLink); a stated
// bandwidth must be positive.
type LinkSpec struct {
	BandwidthGBs *float64 `yaml:"bandwidth_gbs"` // GB/s (1e9 bytes/s) per direction
	LatencyUs    *float64 `yaml:"latency_us"`
}

// LoadScenario reads a YAML scenario (simulate's keys plus cluster:) over
// the defaults. Unknown keys are refused with their line.
func LoadScenario(path string) (Scenario, error) {
	sc := DefaultScenario()
	return sc, decodeFile(path, &sc)
}

// LoadSpec reads a placement file: the keys of a scenario's cluster block
// (pools, router, links, engine). Unknown keys are refused with their
// line.
func LoadSpec(path string) (Spec, error) {
	var s Spec
	return s, decodeFile(path, &s)
}

func decodeFile(path string, dst any) error {
	d, err := yamldoc.ReadFile(path)
	if err != nil {
		return err
	}
	return d.Decode(dst)
}

// DefaultScenario is simulate's default scenario with no cluster block:
// one engine.
func DefaultScenario() Scenario { return Scenario{Scenario: sim.DefaultScenario()} }

// Set applies one override KEY=VALUE with a dotted YAML path over the
// scenario; pools are addressed by name (cluster.pools.decode.replicas=3).
func (sc *Scenario) Set(kv string) error {
	d, err := yamldoc.Overrides(kv)
	if err == nil {
		err = d.Decode(sc)
	}
	return err
}
