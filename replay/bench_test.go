package replay

import (
	"testing"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fit"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/scenario"
)

// benchDataset is a simulated run of ~100k steps.
func benchDataset(b *testing.B) (*datasets.Dataset, *scenario.Plan) {
	dir, p := simulated(b, "bench")
	d, err := datasets.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	return d, p
}

func benchReplay(b *testing.B, noJoin bool, fpModel fpm.FPM) {
	d, p := benchDataset(b)
	if fpModel == nil {
		fpModel = p.Engine().FPM
	}
	var steps int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, err := ReplaySteps(d, StepOptions{FPM: fpModel, Host: p.Engine().Host, NoJoin: noJoin})
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
func BenchmarkReplaySteps(b *testing.B) { benchReplay(b, true, nil) }

// BenchmarkReplayStepsJoin: the same, also streaming step_requests for the
// exact prefill attention and new-request tokens.
func BenchmarkReplayStepsJoin(b *testing.B) { benchReplay(b, false, nil) }

// BenchmarkReplayStepsRecipe: the same with the default recipe fitted to
// the H200 steady benchmark grid (tables inside the hull, linear forms
// outside, composed mixed steps), pricing every step with its 90%
// interval.
func BenchmarkReplayStepsRecipe(b *testing.B) {
	l, err := fit.LoadDatasets([]string{"../datasets/h200/bench-steady"}, fit.LoadOptions{Target: fit.TargetGPU})
	if err != nil {
		b.Fatal(err)
	}
	r, err := fit.FitRecipe(l.Data, fit.RecipeOptions{Bootstrap: 50, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	benchReplay(b, true, r.Model)
}
