package opdb

import (
	"testing"

	"github.com/steplab/steplab/model"
)

// BenchmarkOpsPredict prices mixed and decode steps of Llama-3.1-8B with
// the shipped H200 database, as a simulator does once a step.
func BenchmarkOpsPredict(b *testing.B) {
	o, err := Prior("ops", h200HW, llama8B)
	if err != nil {
		b.Fatal(err)
	}
	steps := []model.Features{
		{DecodeRequests: 37, PaddedBatch: 48, DecodeKVTokens: 37 * 1100},
		{PrefillTokens: 900, PrefillRequests: 1, PrefillAttn: 900 * 450, DecodeRequests: 80, PaddedBatch: 80, DecodeKVTokens: 80 * 1200},
	}
	b.ReportAllocs()
	var sink float64
	for i := 0; b.Loop(); i++ {
		f := steps[i%2]
		f.DecodeKVTokens += float64(i % 512)
		sink += o.PredictNs(f)
	}
	_ = sink
}

// BenchmarkOpen reads the shipped database and indexes it for a shape:
// what a run pays once.
func BenchmarkOpen(b *testing.B) {
	for b.Loop() {
		db, err := LoadFS(shippedFS(h200), h200)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := model.NewOps(db, llama8B); err != nil {
			b.Fatal(err)
		}
	}
}
