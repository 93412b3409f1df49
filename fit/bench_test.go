package fit

import (
	"runtime"
	"sync"
	"testing"

	"github.com/steplab/steplab/model"
)

// docs/architecture.md#performance-targets: fit 1M steps × 8 features by NNLS in under 2 s on one core
// (run with -cpu 1). Data generation is outside the timed region.

var (
	bench1MOnce sync.Once
	bench1M     *Design
)

var benchTrue8 = []float64{4e6, 60, 3, 0.02, 2e4, 1.5, 5e4, 4}

func design1M8(b *testing.B) *Design {
	bench1MOnce.Do(func() {
		d := synthData(99, 1_000_000, model.DefaultTerms, benchTrue8, 0.03)
		// synthFeatures leaves admission terms at zero: give steps some.
		for i := range d.Features {
			if i%7 == 0 {
				d.Features[i].NewRequests = float64(1 + i%5)
				d.Features[i].NewReqTokens = float64(100 * (1 + i%37))
				d.Y[i] += 5e4*d.Features[i].NewRequests + 4*d.Features[i].NewReqTokens
			}
			if i%3 == 0 && d.Features[i].PrefillRequests > 0 {
				d.Features[i].PrefillKVTokens += 512
			}
		}
		ds, err := d.Design(model.DefaultTerms, false)
		if err != nil {
			panic(err)
		}
		bench1M = ds
		runtime.GC() // the generation's garbage is not the solver's cost
	})
	return bench1M
}

func BenchmarkNNLS1M8(b *testing.B) {
	ds := design1M8(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := NNLS(ds); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(ds.N())*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkHuber1M8(b *testing.B) {
	ds := design1M8(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Huber(ds, HuberOptions{NonNegative: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBootstrap: 200 pairs-bootstrap replicates of an NNLS fit on
// 10,000 steps × 8 terms, one worker.
func BenchmarkBootstrap(b *testing.B) {
	d := synthData(98, 10_000, synthTerms, synthTrue, 0.03)
	ds, err := d.Design(synthTerms, false)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Bootstrap(ds, MethodNNLS, HuberOptions{}, BootstrapOptions{Replicates: 200, Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
}
