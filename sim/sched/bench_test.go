package sched

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkScheduleDecode measures one steady decode step (Schedule +
// Update) with 256 running requests; finished requests are replaced so the
// batch stays full.
func BenchmarkScheduleDecode(b *testing.B) {
	for _, async := range []bool{false, true} {
		b.Run(fmt.Sprintf("async=%v", async), func(b *testing.B) {
			const batch = 256
			cfg := Config{MaxNumSeqs: batch, MaxNumBatchedTokens: 8192, BlockSize: 16,
				NumGPUBlocks: batch*520 + 1, MaxModelLen: 8192, ChunkedPrefill: true, PrefixCaching: true}
			s, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			add := func() {
				if err := s.Add(&Request{ID: fmt.Sprint(n), PromptTokens: 128, MaxOutputTokens: 8000}); err != nil {
					b.Fatal(err)
				}
				n++
			}
			for i := 0; i < batch; i++ {
				add()
			}
			var prev *Output
			step := func() {
				o := s.Schedule()
				if !async {
					for range s.Update(o).FinishedIDs {
						add()
					}
					return
				}
				// Depth 2: keep the previous output, update it after
				// scheduling the next one.
				if prev != nil {
					for range s.Update(prev).FinishedIDs {
						add()
					}
				}
				prev = o
			}
			for i := 0; i < 4; i++ { // admit and reach steady decode
				step()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				step()
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/step")
		})
	}
}

// BenchmarkTraceLike drives 19,366 requests with conversation-like lengths
// (prompt 100..2100, output 20..520, a third sharing a system prompt) through
// a default engine, synchronously, a few arrivals per step: the scheduler's
// share of simulating the Azure conversation trace.
func BenchmarkTraceLike(b *testing.B) {
	const nReq = 19366
	rng := rand.New(rand.NewPCG(1, 2))
	reqs := make([]Request, nReq)
	system := make([]uint64, 32)
	for i := range system {
		system[i] = uint64(1000 + i)
	}
	for i := range reqs {
		p := 100 + rng.IntN(2000)
		reqs[i] = Request{ID: fmt.Sprint(i), PromptTokens: p, MaxOutputTokens: 20 + rng.IntN(500)}
		if i%3 == 0 {
			reqs[i].BlockHashes = system[:min(len(system), p/16)]
		}
	}
	cfg := DefaultConfig()
	cfg.NumGPUBlocks = 40000
	b.ReportAllocs()
	b.ResetTimer()
	steps := 0
	for it := 0; it < b.N; it++ {
		s, _ := New(cfg)
		next := 0
		for next < nReq || s.HasUnfinished() {
			for k := 0; k < 2 && next < nReq; k++ {
				r := reqs[next] // fresh copy per run
				if err := s.Add(&r); err != nil {
					b.Fatal(err)
				}
				next++
			}
			s.Update(s.Schedule())
			steps++
		}
	}
	b.ReportMetric(float64(steps)/float64(b.N), "steps/run")
}
