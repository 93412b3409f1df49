package scenario

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/steplab/steplab/internal/yamldoc"
	"github.com/steplab/steplab/sim/cluster"
)

// Spec is a placement: pools of engines, the router in front of them and
// the links between GPUs. The GPU and the model, experts and all, are the
// scenario's hardware and model (catalogue names, a hardware spec file, a
// config.json).
type Spec struct {
	// Pools in document order (a mapping of name to pool in YAML). None:
	// one aggregated engine.
	Pools Pools `yaml:"pools"`
	// Router picks the engine of each request (cluster.RouterNames).
	Router cluster.RouterSpec `yaml:"router"`
	// Links price what crosses GPUs: prompt KV from a prefill to a decode
	// engine, and the all-to-all of expert parallelism.
	Links cluster.Links `yaml:"links"`
	// Engine sets engine keys (simulate's engine block) for every pool,
	// before each pool's own engine keys: in a placement file, what a
	// recorded run's manifest does not record.
	Engine yamldoc.Partial[EngineSpec] `yaml:"engine"`
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
	Engine yamldoc.Partial[EngineSpec] `yaml:"engine"`
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
