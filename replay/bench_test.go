package replay

import (
	"testing"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/sim"
)

// benchDataset is a simulated run of ~100k steps.
func benchDataset(b *testing.B) (*datasets.Dataset, *sim.Plan) {
	dir, p := simulated(b, "bench", func(sc *sim.Scenario) {
		sc.Workload = sim.WorkloadSpec{Kind: "poisson", RateRPS: 10, Requests: 5000,
			Prompt: sim.LengthSpec{Kind: "lognormal", Mean: 900, Sigma: 0.8, Max: 6000},
			Output: sim.LengthSpec{Kind: "lognormal", Mean: 250, Sigma: 0.7, Max: 2000}}
	})
	d, err := datasets.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	return d, p
}

func benchReplay(b *testing.B, noJoin bool) {
	d, p := benchDataset(b)
	var steps int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, err := ReplaySteps(d, StepOptions{FPM: p.FPM, Host: p.Host, NoJoin: noJoin})
		if err != nil {
			b.Fatal(err)
		}
		steps += s.Steps
	}
	b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "steps/s")
	b.ReportMetric(float64(steps)/float64(b.N), "steps/op")
}

// BenchmarkReplaySteps: read the steps table (projected columns), re-price
// every step (roofline FPM + host model), accumulate the summary.
func BenchmarkReplaySteps(b *testing.B) { benchReplay(b, true) }

// BenchmarkReplayStepsJoin: the same, also streaming step_requests for the
// exact prefill attention and new-request tokens.
func BenchmarkReplayStepsJoin(b *testing.B) { benchReplay(b, false) }
