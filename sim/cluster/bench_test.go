package cluster_test

import (
	"flag"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/importers"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/cluster"
	"github.com/steplab/steplab/sim/workload"
)

// mooncakePlan plans replicas engines behind router on the embedded
// Mooncake conversation slice (3,000 requests) at rate req/s, imported
// once for the benchmark.
func mooncakePlan(b *testing.B, replicas int, router string, rate float64) *scenario.Plan {
	dir := filepath.Join(b.TempDir(), "mooncake")
	_, err := importers.Import("mooncake", "embedded:mooncake-conv-fast25", dir, importers.Options{})
	require.NoError(b, err)
	sc := scenario.Default()
	sc.Workload = scenario.WorkloadSpec{Kind: "trace", Trace: dir, BlockSize: 512, RateRPS: rate}
	sc.Engine.MaxModelLen = 131072 // Llama-3.1-8B's context: the trace's longest prompts exceed 32K
	require.NoError(b, sc.Set(fmt.Sprintf("cluster.pools={sim: {replicas: %d}}", replicas)))
	sc.Cluster.Router.Name = router
	p, err := sc.Plan()
	require.NoError(b, err)
	return p
}

// BenchmarkMooncake16 is the placement target: sixteen replicas behind a
// router on the Mooncake conversation slice at 12 req/s cost, per
// simulated request, within 1.5× of one engine serving the requests one
// replica sees (BenchmarkMooncakeOneEngine). Run with -cpu 1; compare the
// ns/request metrics.
func BenchmarkMooncake16(b *testing.B) {
	for _, router := range []string{cluster.RouterKV, cluster.RouterRoundRobin} {
		b.Run(router, func(b *testing.B) {
			p := mooncakePlan(b, 16, router, 12)
			benchSimulate(b, p, func() workload.Peeker { return arrivalsOf(b, p, 1) })
		})
	}
}

// BenchmarkMooncakeOneEngine is one engine on every sixteenth request of
// the same trace at 12 req/s: the arrivals one replica of
// BenchmarkMooncake16 sees under round robin.
func BenchmarkMooncakeOneEngine(b *testing.B) {
	p := mooncakePlan(b, 16, cluster.RouterRoundRobin, 12)
	one := mooncakePlan(b, 1, cluster.RouterRoundRobin, 12)
	benchSimulate(b, one, func() workload.Peeker { return arrivalsOf(b, p, 16) })
}

// arrivalsOf reads the plan's trace once and replays every every-th
// arrival.
func arrivalsOf(b *testing.B, p *scenario.Plan, every int) workload.Peeker {
	src, _, done, err := p.Source()
	require.NoError(b, err)
	defer done()
	var a []workload.Arrival
	for i := 0; ; i++ {
		x, ok := src.Next()
		if !ok {
			break
		}
		if i%every == 0 {
			a = append(a, x)
		}
	}
	return workload.NewSlice(a)
}

func benchSimulate(b *testing.B, p *scenario.Plan, source func() workload.Peeker) {
	var res *sim.Result
	for b.Loop() {
		b.StopTimer()
		src := source()
		b.StartTimer()
		var err error
		res, err = cluster.SimulateOn(p.Plan, src, cluster.DefaultSide())
		require.NoError(b, err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(res.Requests), "ns/request")
	b.ReportMetric(float64(res.Engine.Steps)/float64(res.Requests), "steps/request")
}

// BenchmarkOneReplicaEngineAzureConv is simulate's main job without the
// dataset (sim's BenchmarkSimulateAzureConv writes it): one engine on the
// Azure conversation trace through the drive loop with the run's metrics,
// against sim's BenchmarkEngineAzureConv (the same loop into a discarding
// sink).
func BenchmarkOneReplicaEngineAzureConv(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "azure")
	_, err := importers.Import("azure", scenario.DefaultTrace, dir, importers.Options{})
	require.NoError(b, err)
	sc := scenario.Default()
	sc.Workload.Trace = dir
	p, err := sc.Plan()
	require.NoError(b, err)
	benchSimulate(b, p, func() workload.Peeker {
		src, _, done, err := p.Source()
		require.NoError(b, err)
		b.Cleanup(done)
		return src
	})
}

// goroutineCounts are the goroutine counts the side-by-side benchmarks
// compare: 1 (one event at a time), then powers of two up to cluster.Jobs().
func goroutineCounts() []int {
	ns := []int{1}
	for n := 2; n <= cluster.Jobs(); n *= 2 {
		ns = append(ns, n)
	}
	if last := ns[len(ns)-1]; last != cluster.Jobs() {
		ns = append(ns, cluster.Jobs())
	}
	return ns
}

// BenchmarkCluster16Replicas is sixteen replicas behind the KV router on
// the bundled Azure conversation trace, one event at a time and side by
// side: tables writes every table (the dataset checked byte-identical to
// the one-goroutine run's), simulate writes nothing (the engines alone).
func BenchmarkCluster16Replicas(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "azure")
	_, err := importers.Import("azure", scenario.DefaultTrace, dir, importers.Options{})
	require.NoError(b, err)
	sc := scenario.Default()
	sc.Workload.Trace = dir
	require.NoError(b, sc.Set("cluster.pools={sim: {replicas: 16}}"))
	require.NoError(b, sc.Set("cluster.router.name=kv"))
	p, err := sc.Plan()
	require.NoError(b, err)
	var want string
	for _, n := range goroutineCounts() {
		b.Run(fmt.Sprintf("tables/goroutines=%d", n), func(b *testing.B) {
			out := filepath.Join(b.TempDir(), "ds")
			var res *sim.Result
			for b.Loop() {
				job, done, err := p.Job(nil)
				require.NoError(b, err)
				res, err = cluster.RunOn(p.Plan, job, out, sim.RunOptions{Overwrite: true}, cluster.SideOf(n, cluster.MinWindowEvents, cluster.AdaptEvery))
				done()
				require.NoError(b, err)
			}
			sha, err := datasets.DirSHA256(out)
			require.NoError(b, err)
			if want == "" {
				want = sha
			}
			require.Equal(b, want, sha, "the dataset on %d goroutines differs from one goroutine's", n)
			reportSteps(b, res)
		})
	}
	for _, n := range goroutineCounts() {
		b.Run(fmt.Sprintf("simulate/goroutines=%d", n), func(b *testing.B) {
			var res *sim.Result
			for b.Loop() {
				src, _, done, err := p.Source()
				require.NoError(b, err)
				res, err = cluster.SimulateOn(p.Plan, src, cluster.SideOf(n, cluster.MinWindowEvents, cluster.AdaptEvery))
				done()
				require.NoError(b, err)
			}
			reportSteps(b, res)
		})
	}
}

func reportSteps(b *testing.B, res *sim.Result) {
	b.ReportMetric(float64(res.Engine.Steps), "steps")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(res.Engine.Steps), "ns/step")
}

var benchRequests = flag.Int("cluster.bench-requests", 1_000_000, "requests of Benchmark1MRequests64Replicas")

// Benchmark1MRequests64Replicas is a million Poisson requests on 64
// replicas behind the KV router at 640 req/s (10 a replica), simulated
// without a dataset, one event at a time and side by side. peak-heap-MB,
// the largest heap in use sampled every 50 ms, stays flat as the run
// grows (-cluster.bench-requests).
func Benchmark1MRequests64Replicas(b *testing.B) {
	sc := scenario.Default()
	sc.Workload = scenario.WorkloadSpec{Kind: "poisson", RateRPS: 640, Requests: *benchRequests,
		Prompt: scenario.LengthSpec{Kind: "lognormal", Mean: 1000, Sigma: 0.8, Min: 1, Max: 8000},
		Output: scenario.LengthSpec{Kind: "lognormal", Mean: 150, Sigma: 0.7, Min: 1, Max: 2000}}
	require.NoError(b, sc.Set("cluster.pools={sim: {replicas: 64}}"))
	require.NoError(b, sc.Set("cluster.router.name=kv"))
	p, err := sc.Plan()
	require.NoError(b, err)
	for _, n := range goroutineCounts() {
		b.Run(fmt.Sprintf("goroutines=%d", n), func(b *testing.B) {
			var res *sim.Result
			peak := peakHeap(func() {
				for b.Loop() {
					src, _, done, err := p.Source()
					require.NoError(b, err)
					res, err = cluster.SimulateOn(p.Plan, src, cluster.SideOf(n, cluster.MinWindowEvents, cluster.AdaptEvery))
					done()
					require.NoError(b, err)
				}
			})
			b.ReportMetric(float64(res.Engine.Steps), "steps")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
		})
	}
}

// peakHeap runs f and returns the largest heap in use seen while it ran.
func peakHeap(f func()) uint64 {
	stop := make(chan struct{})
	got := make(chan uint64)
	go func() {
		var peak uint64
		var ms runtime.MemStats
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-stop:
				got <- peak
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(stop)
	return <-got
}
