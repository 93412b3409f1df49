package planner_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/planner"
	"github.com/steplab/steplab/sweep"
	"github.com/steplab/steplab/workflow/whatif"
)

// small is a plan of a few candidates on a short fixed-length workload.
const small = `name: small
seed: 3
model: Llama-3.1-8B
workload: {kind: poisson, rate_rps: 10, requests: 60, prompt: {kind: fixed, value: 600}, output: {kind: fixed, value: 40}}
cluster: {router: {name: least_requests}}
plan:
  slo: {percentile: 90, ttft_ms: 400, itl_ms: 30}
  gpus: [{hardware: H100-SXM, count: 2, price_per_hour: 3}]
  rate_steps: 4
  space: {tensor_parallel: [1, 2], layouts: [agg, 1p1d]}
`

func doc(t testing.TB, body string, sets ...string) *whatif.Doc {
	t.Helper()
	d, err := whatif.Parse(filepath.Join(t.TempDir(), "plan.yaml"), []byte(body))
	require.NoError(t, err)
	for _, s := range sets {
		require.NoError(t, d.Set(s))
	}
	return d
}

func run(t testing.TB, d *whatif.Doc, jobs int) *sweep.Result {
	t.Helper()
	pd, err := planner.Decode(d)
	require.NoError(t, err)
	var vs []sweep.Vary
	for _, a := range pd.Plan.Axes() {
		vs = append(vs, sweep.Vary{Key: a.Key, Values: a.Values})
	}
	res, err := sweep.Run(d, vs, sweep.Options{Jobs: jobs})
	require.NoError(t, err)
	return res
}

func TestDecodeRefusesBadPlans(t *testing.T) {
	tests := []struct{ set, want string }{
		{"plan.gpus=[{hardware: H100-SXM, count: 2, price_per_hour: 0}]", "plan.gpus[0] (H100-SXM): price_per_hour is 0"},
		{"plan.gpus=[{hardware: H100-SXM, count: -1, price_per_hour: 2}]", "count is -1"},
		{"plan.gpus=[]", "plan.gpus: name at least one GPU type"},
		{"plan.slo.percentile=95", "plan.slo.percentile is 95"},
		{"plan.slo.ttft_ms=0", "plan.slo.ttft_ms is 0"},
		{"plan.slo.e2e_ms=-1", "plan.slo.e2e_ms is -1"},
		{"plan.space.layouts=[agg, 2x3]", `layout "2x3"`},
		{"plan.space.tensor_parallel=[0]", "plan.space.tensor_parallel has 0"},
		{"workload.kind=closed", "workload.kind is closed"},
		{"plan.target_rps=-2", "plan.target_rps is -2"},
		{"plan.bogus=1", "bogus"},
	}
	for _, tt := range tests {
		t.Run(tt.set, func(t *testing.T) {
			_, err := planner.Decode(doc(t, small, tt.set))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestAxesPools(t *testing.T) {
	pd, err := planner.Decode(doc(t, small, "plan.space={layouts: [agg, 2p3d], replicas: [1, 2], expert_parallel: [1, 4]}"))
	require.NoError(t, err)
	axes := pd.Plan.Axes()
	require.Len(t, axes, 2)
	assert.Equal(t, planner.Axis{Key: "hardware", Values: []string{"H100-SXM"}}, axes[0])
	assert.Equal(t, "cluster.pools", axes[1].Key)
	assert.Equal(t, []string{
		"{agg: {role: both, replicas: 1}}", "{agg: {role: both, replicas: 2}}",
		"{agg: {role: both, replicas: 4, expert_parallel: 4}}", "{agg: {role: both, replicas: 8, expert_parallel: 4}}",
		"{prefill: {role: prefill, replicas: 2}, decode: {role: decode, replicas: 3}}",
		"{prefill: {role: prefill, replicas: 4}, decode: {role: decode, replicas: 6}}",
		"{prefill: {role: prefill, replicas: 8, expert_parallel: 4}, decode: {role: decode, replicas: 12, expert_parallel: 4}}",
		"{prefill: {role: prefill, replicas: 16, expert_parallel: 4}, decode: {role: decode, replicas: 24, expert_parallel: 4}}",
	}, axes[1].Values)
}

// A plan gives the same candidates on one core or two, prunes the 1p1d at
// TP=2 (4 GPUs of 2 on offer), and chooses a feasible one whose scenario
// is at its goodput.
func TestPlanChoosesDeterministically(t *testing.T) {
	one, two := run(t, doc(t, small), 1), run(t, doc(t, small), 2)
	a, err := json.Marshal(one)
	require.NoError(t, err)
	b, err := json.Marshal(two)
	require.NoError(t, err)
	assert.JSONEq(t, string(a), string(b))
	cs := one.Candidates()
	require.Len(t, cs, 4)
	// A distributed worker bounds a candidate's work by its most
	// simulations × the workload's requests.
	pd, err := planner.Decode(doc(t, small))
	require.NoError(t, err)
	n, err := sweep.Requests(doc(t, small), one.Vary, 0, one.Points[0].Values)
	require.NoError(t, err)
	assert.Equal(t, 60*pd.Plan.MaxSimulations(), n)
	for _, c := range cs {
		assert.LessOrEqual(t, c.Simulations, pd.Plan.MaxSimulations())
	}
	assert.Equal(t, planner.ByGPUs, cs[3].Pruned, cs[3].Reason)
	s := planner.Summarise(cs)
	require.GreaterOrEqual(t, s.Chosen, 0, s.Why)
	c := cs[s.Chosen]
	assert.True(t, c.Feasible())
	assert.Greater(t, c.GoodputRPS, 0.0)
	assert.LessOrEqual(t, c.TTFTMs, 400.0)
	assert.LessOrEqual(t, c.ITLMs, 30.0)
	assert.Contains(t, c.Scenario, "rate_rps:")
	assert.NotContains(t, c.Scenario, "plan:")
	assert.Contains(t, s.Frontier, s.Chosen)
	assert.Empty(t, s.Notes)
	// 10 requests are a burst the engines absorb far above their bound.
	short := planner.Summarise(run(t, doc(t, small, "workload.requests=10"), 2).Candidates())
	require.Len(t, short.Notes, 1)
	assert.Contains(t, short.Notes[0], "2 candidates met the SLO at over 2 times the prior's rate bound: the workload may be too short")
	dir := t.TempDir()
	require.NoError(t, sweep.Write(dir, one))
	for _, f := range []string{planner.SummaryFile, "frontier.png", "cost.svg", "chosen/" + planner.VLLMFile, "chosen/" + planner.GraphFile,
		"chosen/" + planner.ScenarioFile} {
		assert.FileExists(t, filepath.Join(dir, f))
	}
}

// With no feasible candidate the summary names the constraint that
// excluded the most.
func TestNoFeasibleNamesTheConstraint(t *testing.T) {
	tests := []struct {
		sets []string
		want string
	}{
		{[]string{"plan.slo.itl_ms=0.5"}, "ITL at batch 1 excluded the most (3; gpus 1, itl_batch1 3)"},
		{[]string{"plan.slo.ttft_ms=1"}, "TTFT at zero load excluded the most (3; gpus 1, ttft_zero_load 3)"},
		{[]string{"model=Llama-3.1-70B", "plan.space.tensor_parallel=[1]"}, "memory (the model or its KV cache does not fit) excluded the most (2;"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			s := planner.Summarise(run(t, doc(t, small, tt.sets...), 2).Candidates())
			assert.Equal(t, -1, s.Chosen)
			assert.Contains(t, s.Why, tt.want)
		})
	}
}

// A target rate excludes the candidates whose bound is far below it, and
// when no feasible one reaches it the summary says so.
func TestTargetRate(t *testing.T) {
	cs := run(t, doc(t, small, "plan.target_rps=5000"), 2).Candidates()
	for _, c := range cs[:3] {
		assert.Equal(t, planner.ByThroughput, c.Pruned, c.Reason)
		assert.Contains(t, c.Reason, "under half the target 5000")
	}
	cs = run(t, doc(t, small, "plan.target_rps=60"), 2).Candidates()
	s := planner.Summarise(cs)
	if s.Feasible > 0 {
		for _, c := range cs {
			assert.False(t, c.Feasible() && !c.MeetsTarget && c.GoodputRPS >= 60)
		}
	}
	if s.Chosen < 0 && s.Feasible > 0 {
		assert.Contains(t, s.Why, "no feasible candidate reaches plan.target_rps")
	}
}

// A configuration that is wrong rather than too big (expert parallelism
// of a dense model) refuses the plan, naming the candidate.
func TestWrongConfigurationRefusesThePlan(t *testing.T) {
	d := doc(t, small, "plan.space={expert_parallel: [2]}")
	pd, err := planner.Decode(d)
	require.NoError(t, err)
	var vs []sweep.Vary
	for _, a := range pd.Plan.Axes() {
		vs = append(vs, sweep.Vary{Key: a.Key, Values: a.Values})
	}
	_, err = sweep.Run(d, vs, sweep.Options{Jobs: 1})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sweep point 0")
	assert.Contains(t, err.Error(), "expert_parallel")
}

// BenchmarkCandidate is one simulated candidate (its pruning and
// bisection): of the small plan, and of Llama-3.1-70B at TP=4 on 200
// requests of the Azure conversation trace. A 1,000-candidate plan costs
// about 1,000 of these divided by the cores.
func BenchmarkCandidate(b *testing.B) {
	for _, bc := range []struct {
		name string
		sets []string
	}{
		{"poisson-60", []string{"plan.space={tensor_parallel: [1]}"}},
		{"azure-200-70B-TP4", []string{"model=Llama-3.1-70B", "workload={kind: trace, trace: 'embedded:azure-conv-2023', limit: 200}",
			"plan.gpus=[{hardware: H100-SXM, count: 8, price_per_hour: 3}]", "plan.slo={ttft_ms: 500, itl_ms: 30}", "plan.space={tensor_parallel: [4]}"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			d := doc(b, small, bc.sets...)
			for b.Loop() {
				cs := run(b, d, 1).Candidates()
				require.True(b, cs[0].Feasible(), cs[0].Reason)
			}
		})
	}
}

// FuzzDecode: any plan document decodes or is refused, never a panic; a
// decoded one has axes whose layouts parse.
func FuzzDecode(f *testing.F) {
	f.Add(small)
	f.Add("plan: {space: {layouts: [3p1d, agg, p2d]}}")
	f.Fuzz(func(t *testing.T, body string) {
		d, err := whatif.Parse("plan.yaml", []byte(body))
		if err != nil {
			return
		}
		pd, err := planner.Decode(d)
		if err != nil {
			return
		}
		for _, a := range pd.Plan.Axes() {
			assert.NotEmpty(t, a.Values, a.Key)
		}
	})
}
