package fpm

import "testing"

// benchSteps is a spread of steps across the test recipe's regions:
// decode inside and outside the table's hull, prefill, composed mixed.
var benchSteps = []Features{
	dec(8, 1024), dec(20, 700), dec(32, 4096), dec(300, 2000),
	{PrefillTokens: 2048, PrefillRequests: 1, PrefillAttn: 2048 * 1024},
	{PrefillTokens: 500, PrefillRequests: 1, DecodeRequests: 24, DecodeKVTokens: 24 * 1500},
}

var sink float64

// BenchmarkRecipePredict: a point prediction, the cost a simulator pays
// per step.
func BenchmarkRecipePredict(b *testing.B) {
	r := testRecipeB(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sink += r.PredictNs(benchSteps[i%len(benchSteps)])
	}
}

// BenchmarkRecipeInterval: a prediction with its 90% interval, the cost
// step replay pays per step.
func BenchmarkRecipeInterval(b *testing.B) {
	r := testRecipeB(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_, lo, hi := r.PredictIntervalNs(benchSteps[i%len(benchSteps)], 0.9)
		sink += lo + hi
	}
}

// BenchmarkRooflinePredict: the prepared roofline prior, for scale.
func BenchmarkRooflinePredict(b *testing.B) {
	r := NewRoofline(h200, llama8B).Prepare()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sink += r.PredictNs(benchSteps[i%len(benchSteps)])
	}
}
