package planner

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Launch settings of a configuration, for the engines it simulates: the
// vLLM engine arguments of each pool's worker, and the same as a
// Dynamo-style graph of a frontend and one worker service per pool.

// VLLMArgs are the vllm serve command lines, one per pool. The model is
// the scenario's (a catalogue name stands for its checkpoint).
func (c Config) VLLMArgs() []string {
	var out []string
	for _, p := range c.Pools {
		out = append(out, "vllm serve "+c.Model+" "+strings.Join(c.engineArgs(p), " "))
	}
	return out
}

// engineArgs are one pool's engine arguments.
func (c Config) engineArgs(p PoolConfig) []string {
	a := []string{fmt.Sprintf("--tensor-parallel-size %d", c.TensorParallel), fmt.Sprintf("--max-num-seqs %d", c.MaxNumSeqs),
		fmt.Sprintf("--max-num-batched-tokens %d", c.MaxNumBatchedTokens)}
	if c.KVCacheDType != "" && c.KVCacheDType != "auto" {
		a = append(a, "--kv-cache-dtype "+c.KVCacheDType)
	}
	if c.WeightDType != "" && c.WeightDType != "auto" && c.WeightDType != "bf16" {
		a = append(a, "--quantization "+c.WeightDType)
	}
	if p.ExpertParallel > 1 {
		a = append(a, fmt.Sprintf("--data-parallel-size %d", p.ExpertParallel), "--enable-expert-parallel")
	}
	if p.Role != "both" {
		a = append(a, `--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'`)
	}
	return a
}

// Graph is the configuration as a Dynamo-style disaggregated graph
// deployment: a frontend with its router and a worker service per pool,
// its replicas, GPUs and engine arguments.
func (c Config) Graph(name string) ([]byte, error) {
	type resources struct {
		Limits map[string]string `yaml:"limits"`
	}
	type service struct {
		ComponentType    string    `yaml:"componentType"`
		SubComponentType string    `yaml:"subComponentType,omitempty"`
		Replicas         int       `yaml:"replicas"`
		Resources        resources `yaml:"resources,omitempty"`
		Args             []string  `yaml:"args,omitempty"`
	}
	services := yaml.Node{Kind: yaml.MappingNode}
	add := func(name string, s service) error {
		var v yaml.Node
		if err := v.Encode(s); err != nil {
			return err
		}
		services.Content = append(services.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: name}, &v)
		return nil
	}
	if err := add("Frontend", service{ComponentType: "frontend", Replicas: 1, Args: []string{"--router-mode " + c.dynamoRouter()}}); err != nil {
		return nil, err
	}
	for _, p := range c.Pools {
		s := service{ComponentType: "worker", Replicas: instances(p),
			Resources: resources{Limits: map[string]string{"gpu": fmt.Sprint(c.TensorParallel * max(1, p.ExpertParallel))}},
			Args:      append([]string{"--model " + c.Model}, c.engineArgs(p)...)}
		worker := "VllmWorker"
		if p.Role != "both" {
			s.SubComponentType = p.Role
			worker = "Vllm" + strings.ToUpper(p.Role[:1]) + p.Role[1:] + "Worker"
			if p.Role == "prefill" {
				s.Args = append(s.Args, "--is-prefill-worker")
			}
		}
		if err := add(worker, s); err != nil {
			return nil, err
		}
	}
	doc := map[string]any{
		"apiVersion": "nvidia.com/v1alpha1",
		"kind":       "DynamoGraphDeployment",
		"metadata":   map[string]string{"name": name},
		"spec":       map[string]any{"services": &services},
	}
	return yaml.Marshal(doc)
}

// dynamoRouter is the frontend's router mode for the simulated router:
// kv for the KV router, round-robin otherwise.
func (c Config) dynamoRouter() string {
	if c.Router == "kv" {
		return "kv"
	}
	return "round-robin"
}
