package cluster_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/internal/rewrite"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/cluster"
	"github.com/steplab/steplab/sim/workload"
)

// autoscaleScenario is a tiny model behind least_requests whose pool a
// scans with a planner every 200 ms of simulated time.
func autoscaleScenario(t *testing.T, sets ...string) scenario.Scenario {
	t.Helper()
	sc := scenario.Default()
	sc.Model = "tiny"
	sc.Engine.MaxNumSeqs = 8
	sc.Engine.MaxModelLen = 8192
	sc.Engine.NumGPUBlocks = 2000
	for _, s := range append([]string{"cluster.router.name=least_requests",
		"cluster.pools={a: {replicas: 1, autoscale: {max_replicas: 4, interval_s: 0.2, load_time_s: 0.3, scale_up_delay_s: 0.1, cooldown_s: 0.4, target_load: 0.5}}}"},
		sets...) {
		require.NoError(t, sc.Set(s), s)
	}
	return sc
}

func TestAutoscaleValidation(t *testing.T) {
	for _, tc := range []struct {
		name, set, want string
	}{
		{"min above max", "cluster.pools.a.autoscale.min_replicas=5", "max_replicas 4 is below min_replicas 5: use max_replicas >= 5"},
		{"no max", "cluster.pools.a.autoscale.max_replicas=0", "cluster.pools.a.autoscale.max_replicas is 0: set the most engines"},
		{"negative min", "cluster.pools.a.autoscale.min_replicas=-1", "min_replicas is -1: use 1 or more"},
		{"start outside", "cluster.pools.a.replicas=6", "cluster.pools.a.replicas 6 is outside the autoscale range [1, 4]"},
		{"negative delay", "cluster.pools.a.autoscale.scale_up_delay_s=-1", "cluster.pools.a.autoscale.scale_up_delay_s is -1: use a time in seconds from 0 to 1e+07"},
		{"negative load time", "cluster.pools.a.autoscale.load_time_s=-2", "load_time_s is -2"},
		{"negative cooldown", "cluster.pools.a.autoscale.cooldown_s=-3", "cooldown_s is -3"},
		{"negative interval", "cluster.pools.a.autoscale.interval_s=-1", "interval_s is -1"},
		{"tiny interval", "cluster.pools.a.autoscale.interval_s=1e-6", "interval_s is 1e-06: use at least 0.001 s between decisions, or 0 for 60"},
		{"endless load", "cluster.pools.a.autoscale.load_time_s=1e300", "load_time_s is 1e+300"},
		{"target above 1", "cluster.pools.a.autoscale.target_load=1.5", "target_load is 1.5: use a load per engine in (0, 1], e.g. 0.25"},
		{"headroom 1", "cluster.pools.a.autoscale.headroom=1", "headroom is 1: use a share of the SLO in [0, 1)"},
		{"unknown policy", "cluster.pools.a.autoscale.policy=magic", `policy "magic": use load or slo`},
		{"slo without slo", "cluster.pools.a.autoscale.policy=slo", "policy slo keeps headroom to the scenario's slo, which sets none: add slo: {ttft_ms: 500, itl_ms: 50}"},
		{"negative slo", "slo.ttft_ms=-5", "slo.ttft_ms is -5"},
		{"session router", "cluster.router.name=session", "router session keeps each session on its engine"},
		{"expert parallel", "cluster.pools={e: {replicas: 2, expert_parallel: 2, autoscale: {max_replicas: 4}}}", "cluster.pools.e.autoscale: pool e runs expert-parallel instances"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := autoscaleScenario(t)
			require.NoError(t, sc.Set(tc.set))
			_, err := sc.EnginePlan()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	t.Run("unknown key", func(t *testing.T) {
		sc := autoscaleScenario(t)
		err := sc.Set("cluster.pools.a.autoscale.max=3")
		require.Error(t, err)
		assert.Contains(t, err.Error(), `unknown key "max" in cluster.pools.a.autoscale`)
	})
	t.Run("replicas default to min", func(t *testing.T) {
		sc := autoscaleScenario(t, "cluster.pools={b: {autoscale: {min_replicas: 2, max_replicas: 3}}}", "cluster.pools.a.autoscale=null")
		sc.Cluster.Pools = sc.Cluster.Pools[1:]
		p, err := sc.EnginePlan()
		require.NoError(t, err)
		assert.Equal(t, 2, p.Pools[0].Replicas)
		assert.True(t, p.Elastic())
	})
}

// burst is a workload that idles, bursts and idles again: arrivals 200 ms
// apart, then 5 ms apart, then 200 ms apart.
func burst(r *rand.Rand, blockSize int) []workload.Arrival {
	var out []workload.Arrival
	t := int64(0)
	for i := range 60 + r.IntN(120) {
		gap := 200e6
		if i >= 20 && i < 100 {
			gap = 5e6
		}
		t += int64(r.ExpFloat64() * gap)
		p := 16 + r.IntN(800)
		hashes := make([]uint64, p/blockSize)
		for k := range hashes {
			hashes[k] = r.Uint64()
		}
		out = append(out, workload.Arrival{ID: fmt.Sprintf("r%d", i), AtNs: t, PromptTokens: p, OutputTokens: 1 + r.IntN(100), PrefixHashes: hashes})
	}
	return out
}

func runAutoscaled(t *testing.T, seed uint64) (*recorder, *cluster.Plan, []workload.Arrival, *sim.Service, int64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 2))
	routers := []string{cluster.RouterRoundRobin, cluster.RouterLeastRequests, cluster.RouterLeastKV, cluster.RouterKV, cluster.RouterVLLMDP}
	sets := []string{"cluster.router.name=" + routers[r.IntN(len(routers))],
		fmt.Sprintf("cluster.pools.a.autoscale.load_time_s=%g", 0.5*r.Float64()),
		fmt.Sprintf("cluster.pools.a.autoscale.scale_up_delay_s=%g", 0.2*r.Float64()),
		fmt.Sprintf("cluster.pools.a.autoscale.cooldown_s=%g", 0.5*r.Float64()),
		fmt.Sprintf("cluster.pools.a.autoscale.min_replicas=%d", 1+r.IntN(2)),
		fmt.Sprintf("cluster.pools.a.replicas=%d", 2)}
	if r.IntN(2) == 0 { // disaggregated: the decode pool scales
		sets = append(sets, "cluster.pools={p: {role: prefill, replicas: 2}, a: {role: decode}}",
			"cluster.links.kv_transfer={bandwidth_gbs: 5, latency_us: 20}")
	}
	if r.IntN(2) == 0 {
		sets = append(sets, "slo.ttft_ms=50", "slo.itl_ms=5", "cluster.pools.a.autoscale.policy=slo")
	}
	p, err := autoscaleScenario(t, sets...).EnginePlan()
	require.NoError(t, err, "%v", sets)
	arr := burst(r, p.Pools[0].Engine.Sched.BlockSize)
	rec := &recorder{}
	c, err := p.New(rec, nil)
	require.NoError(t, err)
	end, err := cluster.Drive(c, workload.NewSlice(arr))
	require.NoError(t, err, "%v", sets)
	require.NoError(t, c.Finish(end))
	last := cluster.LastTime(c, 0)
	return rec, p.Plan, arr, c.Service(last), last
}

// Over random autoscaled runs: no request is lost, the routable engines
// stay within [min, max], no request is routed to an engine that is not
// routable then (loading, draining or removed), no engine steps outside
// [start, removal], GPU-hours are the integral of the engines holding
// GPUs, and a second run records the same.
func TestAutoscaleProperties(t *testing.T) {
	events := map[string]int{}
	for seed := uint64(1); seed <= 40; seed++ {
		rec, p, arr, svc, end := runAutoscaled(t, seed)
		fail := func(format string, a ...any) { t.Fatalf("seed %d: %s", seed, fmt.Sprintf(format, a...)) }
		checkRequests(rec, arr, fail)
		require.Len(t, svc.Autoscaled, 1)
		a := svc.Autoscaled[0]
		var pp *cluster.PoolPlan
		for _, q := range p.Pools {
			if q.Name == a.Pool {
				pp = q
			}
		}
		type span struct{ start, ready, drain, remove float64 }
		spans := map[string]*span{}
		inf := math.Inf(1)
		prev, gpuS, live, endS := 0.0, 0.0, 0, float64(end)/1e9
		for _, e := range a.Timeline {
			gpuS += float64(live) * (min(e.AtS, endS) - min(prev, endS))
			prev, live = e.AtS, e.Live
			assert.GreaterOrEqual(t, e.Serving, a.MinReplicas, "seed %d: %+v", seed, e)
			assert.LessOrEqual(t, e.Serving, a.MaxReplicas, "seed %d: %+v", seed, e)
			assert.GreaterOrEqual(t, e.Live, e.Serving, "seed %d: %+v", seed, e)
			s := spans[e.Worker]
			if s == nil {
				s = &span{start: e.AtS, ready: inf, drain: inf, remove: inf}
				spans[e.Worker] = s
			}
			events[e.Event]++
			switch e.Event {
			case "ready":
				s.ready = e.AtS
			case "drain":
				s.drain = e.AtS
			case "remove":
				s.remove = e.AtS
			}
		}
		gpuS += float64(live) * max(0, endS-prev)
		tp := float64(max(1, pp.Engine.Shape.TP))
		assert.InDelta(t, gpuS*tp/3600, a.GPUHours, 1e-9, "seed %d: GPU-hours against the timeline", seed)
		for _, x := range rec.routes {
			if x.Pool != a.Pool {
				continue
			}
			s := spans[x.Worker]
			at := float64(x.AtNs) / 1e9
			require.NotNil(t, s, "seed %d: route to %s, which never started", seed, x.Worker)
			assert.True(t, at >= s.ready && at < math.Min(s.drain, s.remove), "seed %d: %s routed to %s at %gs outside its routable span %+v", seed, x.ReqID, x.Worker, at, *s)
		}
		for _, st := range rec.steps {
			if s := spans[st.WorkerID]; s != nil {
				at := float64(st.TScheduleStart) / 1e9
				assert.True(t, at >= s.ready && at <= s.remove, "seed %d: %s stepped at %gs outside %+v", seed, st.WorkerID, at, *s)
			}
		}
		again, _, _, svc2, _ := runAutoscaled(t, seed)
		assert.Equal(t, rec.digest(), again.digest(), "seed %d: a second run recorded something else", seed)
		assert.Equal(t, svc, svc2, "seed %d", seed)
	}
	for _, e := range []string{"start", "ready", "drain", "remove"} {
		assert.Positive(t, events[e], "no run had a %s event: the workloads do not exercise scaling", e)
	}
}

// A small autoscaled run: its replicas over time, GPU-hours and SLO
// attainment (refresh with -rewrite).
func TestAutoscaleGolden(t *testing.T) {
	sc := autoscaleScenario(t, "slo.ttft_ms=50", "slo.itl_ms=5", "cluster.pools.a.autoscale.policy=slo",
		"workload.kind=poisson", "workload.duration_s=3", "workload.prompt.max=800",
		"workload.rate_curve=[{t_s: 0, rps: 5}, {t_s: 1, rps: 200}, {t_s: 2, rps: 5}]")
	p, err := sc.Plan()
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "run")
	res, err := scenario.Run(p, dir, sim.RunOptions{})
	require.NoError(t, err)
	got, err := json.MarshalIndent(res.Service, "", "  ")
	require.NoError(t, err)
	golden := filepath.Join("testdata", "autoscale-golden.json")
	if rewrite.Requested() {
		require.NoError(t, os.WriteFile(golden, append(got, '\n'), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got))
	m, err := datasets.ReadManifest(dir)
	require.NoError(t, err)
	require.NotNil(t, m.Cluster.Pools[0].Autoscale, "the manifest records the pool's scaling")
	assert.Equal(t, res.Service.Autoscaled[0].Timeline, m.Cluster.Pools[0].Autoscale.Timeline)
	assert.Greater(t, len(m.Cluster.Pools[0].Workers), 1, "the manifest lists every engine that ran")

	// A replay of the dataset runs the same planner again.
	q, _, err := scenario.PlanFromManifest(m, scenario.ManifestOptions{})
	require.NoError(t, err)
	require.True(t, q.Elastic())
	assert.Equal(t, p.Pools[0].Scaling, q.Pools[0].Scaling)
	assert.Equal(t, p.Pools[0].Replicas, q.Pools[0].Replicas)
}

// A driver that does not say whether arrivals are ahead (Add and Advance
// only, as a what-if stage drives its cluster): the planner sleeps while
// nothing is in flight and wakes with the next request, so the pool still
// scales and the run ends.
func TestAutoscaleWithoutDrive(t *testing.T) {
	p, err := autoscaleScenario(t).EnginePlan()
	require.NoError(t, err)
	arr := burst(rand.New(rand.NewPCG(3, 2)), p.Pools[0].Engine.Sched.BlockSize)
	rec := &recorder{}
	c, err := p.New(rec, nil)
	require.NoError(t, err)
	for _, a := range arr {
		require.NoError(t, c.Advance(a.AtNs-1))
		require.NoError(t, c.Add(a))
	}
	for c.NextAt() != sim.NoWake {
		require.NoError(t, c.Step())
	}
	checkRequests(rec, arr, func(format string, a ...any) { t.Fatalf(format, a...) })
	starts := 0
	for _, e := range c.Service(cluster.LastTime(c, 0)).Autoscaled[0].Timeline {
		if e.Event == "start" {
			starts++
		}
	}
	assert.Positive(t, starts, "the burst started no engine")
}
