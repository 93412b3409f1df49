package workflow

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim/cluster"
	"github.com/steplab/steplab/sim/rng"
	"github.com/steplab/steplab/sim/workload"
)

const ms = int64(1_000_000)

func fixed(ns int64) ServiceTime { return ServiceTime{Kind: ServiceFixed, MeanNs: float64(ns)} }

func lengths(p, o int) workload.Lengths {
	return workload.Lengths{Prompt: workload.Fixed(p), Output: workload.Fixed(o)}
}

func constLoad(rate float64, n int) Load {
	return Load{Kind: LoadConstant, RateRPS: rate, Requests: n, Lengths: lengths(100, 5)}
}

// chain: frontend -> svc -> frontend.
func chain(svc ServiceTime, workers, maxQueue int, svcHost string) *Graph {
	return &Graph{
		Network: Network{InlineNs: 0, LatencyNs: 1 * ms, SerializeNs: 0},
		Stages: []Stage{
			{Name: "fe", Kind: KindFrontend, Host: "a", To: []Edge{{To: "svc"}}},
			{Name: "svc", Kind: KindService, Host: svcHost, Service: svc, Workers: workers, MaxQueue: maxQueue, To: []Edge{{To: "fe"}}},
		},
	}
}

func run(t *testing.T, g *Graph, l Load) *Result {
	t.Helper()
	res, err := Run(g, l, rng.New(1, "test"))
	require.NoError(t, err)
	return res
}

func TestServiceChainLatencies(t *testing.T) {
	tests := []struct {
		name    string
		host    string
		rate    float64
		workers int
		wantE2E []int64
	}{
		{"inline, idle", "a", 10, 0, []int64{5 * ms, 5 * ms, 5 * ms}},
		{"remote pays a hop each way", "b", 10, 0, []int64{7 * ms, 7 * ms, 7 * ms}},
		// 1 worker, 5 ms service, arrivals every 2 ms: FIFO queueing.
		{"one worker queues FIFO", "a", 500, 1, []int64{5 * ms, 8 * ms, 11 * ms}},
		{"unlimited workers overlap", "a", 500, 0, []int64{5 * ms, 5 * ms, 5 * ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, chain(fixed(5*ms), tt.workers, 0, tt.host), constLoad(tt.rate, 3))
			require.Len(t, res.Requests, 3)
			for i, q := range res.Requests {
				assert.Equal(t, StatusOK, q.Status)
				assert.Equal(t, tt.wantE2E[i], q.E2ENs(), "request %d", i)
			}
		})
	}
}

func TestFanOutJoinWaitsForSlowestInput(t *testing.T) {
	g := &Graph{
		Network: Network{LatencyNs: 1 * ms, BandwidthBytesPerSec: 1e6, SerializeNs: 100_000},
		Stages: []Stage{
			{Name: "fe", Kind: KindFrontend, Host: "h", To: []Edge{{To: "orch"}}},
			{Name: "orch", Kind: KindOrchestrator, Host: "h", To: []Edge{{To: "fast"}, {To: "slow", Bytes: 1000}}},
			{Name: "fast", Kind: KindService, Host: "h", Service: fixed(2 * ms), To: []Edge{{To: "join"}}},
			{Name: "slow", Kind: KindService, Host: "r", Service: fixed(10 * ms), To: []Edge{{To: "join", Bytes: 2000}}},
			{Name: "join", Kind: KindJoin, Host: "h", Service: fixed(1 * ms), To: []Edge{{To: "fe"}}},
		},
	}
	res := run(t, g, constLoad(1, 1))
	q := res.Requests[0]
	// orch -> slow: 1 ms + 1000 B at 1 MB/s (1 ms) + 0.1 ms; slow 10 ms;
	// slow -> join: 1 ms + 2 ms + 0.1 ms; join 1 ms.
	hop1, hop2 := 2_100_000, 3_100_000
	want := int64(hop1) + 10*ms + int64(hop2) + 1*ms
	assert.Equal(t, want, q.E2ENs())
	join := q.Stages[g.Index("join")]
	assert.Equal(t, q.Stages[g.Index("slow")].EndNs+int64(hop2), join.ArriveNs, "the join starts when its last input arrives")
	assert.Equal(t, 1*ms, join.LatencyNs())
}

func TestRejectionAndTimeout(t *testing.T) {
	// One worker, queue of 1, 10 ms service, 5 arrivals 1 ms apart: the
	// first runs, the second waits, the rest are rejected.
	g := chain(fixed(10*ms), 1, 1, "a")
	res := run(t, g, constLoad(1000, 5))
	var st []string
	for _, q := range res.Requests {
		st = append(st, q.Status)
	}
	assert.Equal(t, []string{StatusOK, StatusOK, StatusRejected, StatusRejected, StatusRejected}, st)
	assert.Equal(t, "svc", res.Requests[2].RejectedBy)

	// A 15 ms deadline cancels the request that would answer at 19 ms.
	l := constLoad(1000, 2)
	l.TimeoutNs = 15 * ms
	res = run(t, chain(fixed(10*ms), 1, 0, "a"), l)
	assert.Equal(t, StatusOK, res.Requests[0].Status)
	assert.Equal(t, StatusTimeout, res.Requests[1].Status)
	assert.Equal(t, res.Requests[1].ArrivalNs+15*ms, res.Requests[1].ResponseNs)
	assert.Equal(t, int64(-1), res.Requests[1].E2ENs())
}

func TestStartupDrainAndClosedLoop(t *testing.T) {
	l := constLoad(100, 4)
	l.Warmup = 2
	l.StartupNs, l.DrainNs = 2_000*ms, 500*ms
	res := run(t, chain(fixed(5*ms), 0, 0, "a"), l)
	require.Len(t, res.Requests, 6)
	assert.True(t, res.Requests[1].Warmup)
	assert.False(t, res.Requests[2].Warmup)
	assert.Equal(t, 2_000*ms, res.Requests[0].ArrivalNs)
	assert.Equal(t, res.Requests[5].ResponseNs+500*ms, res.ProcessEndNs)

	// Closed loop, 2 users, no think time: at most 2 in flight, so a
	// single worker never queues more than one.
	cl := Load{Kind: LoadClosed, Users: 2, Requests: 6, Lengths: lengths(10, 1)}
	res = run(t, chain(fixed(5*ms), 1, 1, "a"), cl)
	require.Len(t, res.Requests, 6)
	for _, q := range res.Requests {
		assert.Equal(t, StatusOK, q.Status)
	}
	assert.Equal(t, 30*ms, res.Requests[5].ResponseNs, "six 5 ms services back to back on one worker")
}

func TestLognormalAndPerTokenServiceTimes(t *testing.T) {
	r := rng.New(3, "svc")
	ln := ServiceTime{Kind: ServiceLognormal, MeanNs: 4e6, Sigma: 0.5}
	sum := 0.0
	const n = 20000
	for i := 0; i < n; i++ {
		sum += float64(ln.Draw(r, 0, 0))
	}
	assert.InEpsilon(t, 4e6, sum/n, 0.03)
	pt := ServiceTime{Kind: ServicePerToken, BaseNs: 1000, PerPromptTokenNs: 10, PerOutputTokenNs: 100}
	assert.Equal(t, int64(1000+10*874+100*7), pt.Draw(r, 874, 7))
}

func enginePlan(t testing.TB, sets ...string) *cluster.Plan {
	t.Helper()
	sc := scenario.Default()
	sc.Hardware, sc.Model = "H100", "Qwen2.5-7B"
	for _, s := range sets {
		require.NoError(t, sc.Set(s))
	}
	p, err := sc.EnginePlan()
	require.NoError(t, err)
	return p.Plan
}

func TestEngineStage(t *testing.T) {
	g := &Graph{Stages: []Stage{
		{Name: "fe", Kind: KindFrontend, Host: "h", To: []Edge{{To: "gen"}}},
		{Name: "gen", Kind: KindEngine, Host: "h", Engine: enginePlan(t), To: []Edge{{To: "fe"}}},
	}}
	res := run(t, g, constLoad(20, 50))
	for _, q := range res.Requests {
		require.Equal(t, StatusOK, q.Status)
		st := q.Stages[1]
		assert.Greater(t, st.FirstTokenNs, st.StartNs)
		assert.GreaterOrEqual(t, st.EndNs, st.FirstTokenNs)
		assert.Equal(t, st.EndNs, q.ResponseNs)
	}
	assert.Equal(t, int64(50), res.EngineStats["gen"].Finished)
	// Same seed, same run.
	again := run(t, g, constLoad(20, 50))
	assert.Equal(t, res.Requests, again.Requests)
}

// An engine stage can be a cluster: replicas behind a router share the
// load, and a saturated engine's latency falls.
func TestClusterStage(t *testing.T) {
	load := constLoad(40, 200)
	load.Lengths.Prompt, load.Lengths.Output = workload.Fixed(2000), workload.Fixed(300)
	mean := func(p *cluster.Plan) (float64, int64) {
		g := &Graph{Stages: []Stage{
			{Name: "fe", Kind: KindFrontend, Host: "h", To: []Edge{{To: "gen"}}},
			{Name: "gen", Kind: KindEngine, Host: "h", Engine: p, To: []Edge{{To: "fe"}}},
		}}
		res := run(t, g, load)
		var sum float64
		for _, q := range res.Requests {
			require.Equal(t, StatusOK, q.Status)
			sum += float64(q.E2ENs())
		}
		return sum / float64(len(res.Requests)), res.EngineStats["gen"].Finished
	}
	one, n1 := mean(enginePlan(t))
	four, n4 := mean(enginePlan(t, "cluster.pools={g: {replicas: 4}}", "cluster.router.name=least_requests"))
	assert.EqualValues(t, 200, n1)
	assert.EqualValues(t, 200, n4)
	assert.Less(t, four, 0.8*one, "four replicas: %.0f ms, one: %.0f ms", four/1e6, one/1e6)
}

func TestValidate(t *testing.T) {
	base := func() *Graph { return chain(fixed(ms), 0, 0, "a") }
	tests := []struct {
		name  string
		edit  func(g *Graph)
		stage string
		field string
		msg   string
	}{
		{"unplaced", func(g *Graph) { g.Stages[1].Host = "" }, "svc", "host", "not placed"},
		{"unknown edge", func(g *Graph) { g.Stages[1].To[0].To = "nope" }, "svc", "to", "unknown stage \"nope\""},
		{"unknown kind", func(g *Graph) { g.Stages[1].Kind = "gpu" }, "svc", "kind", "unknown kind"},
		{"negative service", func(g *Graph) { g.Stages[1].Service.MeanNs = -1 }, "svc", "service", "negative"},
		{"negative bytes", func(g *Graph) { g.Stages[1].To[0].Bytes = -1 }, "svc", "bytes", "negative"},
		{"no frontend", func(g *Graph) { g.Stages[0].Kind = KindService }, "", "", "exactly one frontend"},
		{"join without inputs", func(g *Graph) {
			g.Stages = append(g.Stages, Stage{Name: "j", Kind: KindJoin, Host: "a", To: []Edge{{To: "fe"}}})
		}, "j", "", "join has no inputs"},
		{"cycle", func(g *Graph) {
			g.Stages[0].To = []Edge{{To: "j"}}
			g.Stages[1].To = []Edge{{To: "j"}, {To: "fe"}}
			g.Stages = append(g.Stages, Stage{Name: "j", Kind: KindJoin, Host: "a", To: []Edge{{To: "svc"}}})
		}, "j", "to", "cycle: j -> svc -> j"},
		{"two inputs without join", func(g *Graph) {
			g.Stages[0].To = append(g.Stages[0].To, Edge{To: "y"})
			g.Stages = append(g.Stages, Stage{Name: "y", Kind: KindService, Host: "a", To: []Edge{{To: "svc"}}})
		}, "svc", "", "only a join"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := base()
			tt.edit(g)
			errs := g.Validate()
			require.NotEmpty(t, errs)
			var ge *Error
			require.True(t, errors.As(errs[0], &ge))
			assert.Equal(t, tt.stage, ge.Stage)
			assert.Equal(t, tt.field, ge.Field)
			assert.Contains(t, ge.Error(), tt.msg)
		})
	}
	assert.Empty(t, base().Validate())
}
