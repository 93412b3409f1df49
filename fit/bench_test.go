package fit

import (
	"flag"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
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
		d := synthData(99, 1_000_000, fpm.DefaultTerms, benchTrue8, 0.03)
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
		ds, err := d.Design(fpm.DefaultTerms, false)
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

var fitRows = flag.Int("fit-rows", 10_000_000, "steps of BenchmarkFitDatasets' synthetic traffic dataset")

// BenchmarkFitDatasets: `steplab fit`'s default recipe (5 folds, 200
// bootstrap replicates, at most DefaultMaxRowsPerKind rows a kind) on a
// synthetic traffic dataset of -fit-rows steps (every 20th mixed). It
// reports rows read per second and the peak heap in use while fitting,
// which the row bound keeps flat in the dataset's length.
func BenchmarkFitDatasets(b *testing.B) {
	dir := writeSynthTraffic(b, *fitRows)
	cfg := FitConfig{Recipe: RecipeOptions{Bootstrap: 200}, CV: 5, Seed: 1,
		Load: LoadOptions{MaxRowsPerKind: DefaultMaxRowsPerKind, SampleSeed: 1}}
	runtime.GC()
	peak := watchHeap()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, _, _, err := FitDatasets([]string{dir}, cfg); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(*fitRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(peak())/(1<<20), "peak-heap-MB")
}

// writeSynthTraffic writes n decode and mixed steps, a part's worth at a
// time, as a dataset under b.TempDir().
func writeSynthTraffic(b *testing.B, n int) string {
	dir := filepath.Join(b.TempDir(), "traffic")
	w, err := datasets.Create(dir, datasets.Manifest{Name: "synthetic-traffic", Source: datasets.Source{Kind: "test"}}, datasets.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	tw, err := datasets.NewTableWriter[datasets.Step](w, datasets.TableSteps, datasets.TableOptions{})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	buf := make([]datasets.Step, 0, 65536)
	for i := range n {
		bs := 1 + rng.IntN(128)
		ctx := 128 + rng.IntN(4096)
		st := datasets.Step{StepID: int64(i), Kind: datasets.KindDecode, Role: datasets.RoleProduction, Valid: true, BenchmarkID: -1,
			NumCachedReqs: int32(bs), NumDecodeRequests: int32(bs), SumDecodeKVTokens: int64(bs * ctx), MaxDecodeKVTokens: int64(ctx),
			TotalScheduledTokens: int64(bs), NumNewReqs: 0}
		y := 4e6 + 60*float64(bs) + 3*float64(bs*ctx)
		if i%20 == 0 {
			c := 64 + rng.IntN(2048)
			st.Kind, st.NumPrefillRequests, st.SumPrefillTokens, st.NumNewReqs = datasets.KindMixed, 1, int64(c), 1
			st.TotalScheduledTokens += int64(c)
			y += 300 * float64(c)
		}
		st.GPUTimeNs = int64(y * (1 + 0.03*rng.NormFloat64()))
		st.WallTimeNs = st.GPUTimeNs + 200_000
		if buf = append(buf, st); len(buf) == cap(buf) || i == n-1 {
			if err := tw.Write(buf); err != nil {
				b.Fatal(err)
			}
			buf = buf[:0]
		}
	}
	if err := tw.Close(); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return dir
}

// watchHeap samples the heap in use until the returned function is
// called, which returns the largest sample.
func watchHeap() func() uint64 {
	var peak atomic.Uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		var ms runtime.MemStats
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if h := ms.HeapInuse; h > peak.Load() {
				peak.Store(h)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-stopped
		return peak.Load()
	}
}
