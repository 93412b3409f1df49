package cluster_test

import (
	"bytes"
	"testing"

	"github.com/steplab/steplab/scenario"
	"go.yaml.in/yaml/v3"
)

// A scenario's cluster block, whatever its bytes, is read and planned or
// refused with an error: never a panic.
func FuzzScenario(f *testing.F) {
	for _, seed := range []string{
		"cluster: {pools: {a: {replicas: 2}}, router: {name: kv}}",
		"cluster: {pools: {p: {role: prefill, replicas: 1}, d: {role: decode, replicas: 2, engine: {max_num_seqs: 8}}}, links: {kv_transfer: {bandwidth_gbs: 10}}}",
		"model: testdata/tiny-moe\ncluster: {pools: {e: {replicas: 4, expert_parallel: 2}}, links: {expert: {latency_us: 3}}}",
		"cluster: {pools: [1, 2]}",
		"hardware: testdata/imaginary-gpu.yaml\ncluster: {pools: {p: {role: prefill, replicas: 1, hardware: H200}, d: {role: decode, replicas: 1}}}",
		"model: tiny\ncluster: {engine: {async_scheduling: true}, pools: {x: {replicas: 1}}, router: {name: session, session_tokens: 32}}",
		"model: tiny\nslo: {ttft_ms: 50}\ncluster: {pools: {a: {replicas: 2, autoscale: {policy: slo, max_replicas: 4, load_time_s: 1, cooldown_s: 0}}}}",
		"workload: {kind: poisson, rate_curve: [{t_s: 0, rps: 1}, {t_s: 10, rps: 0}], duration_s: 5}\ncluster: {pools: {a: {autoscale: {min_replicas: 2, max_replicas: 1}}}}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sc := scenario.Default()
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&sc); err != nil {
			return
		}
		p, err := sc.EnginePlan()
		if err != nil {
			return
		}
		if p.GPUs() < 1 || len(p.Pools) == 0 {
			t.Fatalf("a plan without GPUs: %+v", p)
		}
	})
}
