package opdb

import (
	"github.com/steplab/steplab/fpm"
	"testing"
)

// BenchmarkOpsPredict prices mixed and decode steps of Llama-3.1-8B, as a
// simulator does once a step: with the vLLM database (no host times), and
// with the worker's, whose mixed step of 980 rows is past the largest CUDA
// graph and priced with the host's dispatch overlapped.
func BenchmarkOpsPredict(b *testing.B) {
	steps := []fpm.Features{
		{DecodeRequests: 37, PaddedBatch: 48, DecodeKVTokens: 37 * 1100, DecodeMaxKVTokens: 3000},
		{PrefillTokens: 900, PrefillRequests: 1, PrefillAttn: 900 * 450, DecodeRequests: 80, PaddedBatch: 80, DecodeKVTokens: 80 * 1200, DecodeMaxKVTokens: 4000},
	}
	for _, spec := range []string{"ops", "ops:h200-sxm-worker"} {
		b.Run(spec, func(b *testing.B) {
			o, _, err := Prior(spec, Query{Hardware: h200HW, Shape: llama8B})
			if err != nil {
				b.Fatal(err)
			}
			o = o.WithGraphs([]int{1, 2, 4, 8, 16, 32, 64, 128, 256, 512})
			b.ReportAllocs()
			var sink float64
			for i := 0; b.Loop(); i++ {
				f := steps[i%2]
				f.DecodeKVTokens += float64(i % 512)
				sink += o.PredictNs(f)
			}
			_ = sink
		})
	}
}

// BenchmarkOpen reads the shipped database and indexes it for a shape:
// what a run pays once.
func BenchmarkOpen(b *testing.B) {
	for b.Loop() {
		db, err := LoadFS(shippedFS(h200), h200)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := fpm.NewOps(db, llama8B); err != nil {
			b.Fatal(err)
		}
	}
}
