package cluster

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets/importers"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/workload"
)

// mooncakePlan plans replicas engines behind router on the embedded
// Mooncake conversation slice (3,000 requests) at rate req/s, imported
// once for the benchmark.
func mooncakePlan(b *testing.B, replicas int, router string, rate float64) *Plan {
	dir := filepath.Join(b.TempDir(), "mooncake")
	_, err := importers.Import("mooncake", "embedded:mooncake-conv-fast25", dir, importers.Options{})
	require.NoError(b, err)
	sc := DefaultScenario()
	sc.Workload = sim.WorkloadSpec{Kind: "trace", Trace: dir, BlockSize: 512, RateRPS: rate}
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
	for _, router := range []string{RouterKV, RouterRoundRobin} {
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
	p := mooncakePlan(b, 16, RouterRoundRobin, 12)
	one := mooncakePlan(b, 1, RouterRoundRobin, 12)
	benchSimulate(b, one, func() workload.Peeker { return arrivalsOf(b, p, 16) })
}

// arrivalsOf reads the plan's trace once and replays every every-th
// arrival.
func arrivalsOf(b *testing.B, p *Plan, every int) workload.Peeker {
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

func benchSimulate(b *testing.B, p *Plan, source func() workload.Peeker) {
	var res *sim.Result
	for b.Loop() {
		b.StopTimer()
		src := source()
		b.StartTimer()
		var err error
		res, err = simulate(p, src, nil, sim.RunOptions{})
		require.NoError(b, err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(res.Requests), "ns/request")
	b.ReportMetric(float64(res.Engine.Steps)/float64(res.Requests), "steps/request")
}

// BenchmarkOneReplicaAzureConv is simulate's main job through the cluster
// (what steplab simulate runs): one engine on the Azure conversation
// trace, every table written. Compare with sim's
// BenchmarkSimulateAzureConv/all-tables, the engine driven directly.
func BenchmarkOneReplicaAzureConv(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "azure")
	_, err := importers.Import("azure", sim.DefaultTrace, dir, importers.Options{})
	require.NoError(b, err)
	sc := DefaultScenario()
	sc.Workload.Trace = dir
	p, err := sc.Plan()
	require.NoError(b, err)
	out := filepath.Join(b.TempDir(), "ds")
	for b.Loop() {
		_, err := Run(p, out, sim.RunOptions{Overwrite: true})
		require.NoError(b, err)
	}
}

// BenchmarkOneReplicaEngineAzureConv is BenchmarkOneReplicaAzureConv
// without the dataset: the cluster's event loop around one engine against
// sim's BenchmarkEngineAzureConv (sim.Drive).
func BenchmarkOneReplicaEngineAzureConv(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "azure")
	_, err := importers.Import("azure", sim.DefaultTrace, dir, importers.Options{})
	require.NoError(b, err)
	sc := DefaultScenario()
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
