package sched_test

import (
	"fmt"

	"github.com/steplab/steplab/sim/sched"
)

// Two requests share a 2-block system prompt. The first computes it; the
// second, arriving while the first decodes, reuses it from the prefix cache.
func Example() {
	s, err := sched.New(sched.Config{
		MaxNumSeqs: 8, MaxNumBatchedTokens: 64, BlockSize: 16, NumGPUBlocks: 33,
		MaxModelLen: 512, ChunkedPrefill: true, PrefixCaching: true,
	})
	if err != nil {
		panic(err)
	}
	system := []uint64{0xa1, 0xa2} // chain hashes of the two shared blocks
	s.Add(&sched.Request{ID: "a", PromptTokens: 40, MaxOutputTokens: 2, BlockHashes: system})

	print := func(out *sched.Output) {
		fmt.Printf("step %d: %d tokens\n", out.StepID, out.TotalScheduledTokens)
		for _, r := range out.NewReqs {
			fmt.Printf("  new %s: %d tokens, prefix hit %d, blocks %v\n", r.Req.ID, r.NumScheduledTokens, r.PrefixHitTokens, r.BlockIDs)
		}
		for _, r := range out.CachedReqs {
			fmt.Printf("  cached %s: %d tokens, decode=%v\n", r.Req.ID, r.NumScheduledTokens, !r.IsPrefill)
		}
	}
	for step := 0; s.HasUnfinished(); step++ {
		if step == 1 {
			s.Add(&sched.Request{ID: "b", PromptTokens: 36, MaxOutputTokens: 1, BlockHashes: system})
		}
		out := s.Schedule()
		print(out)
		if res := s.Update(out); len(res.FinishedIDs) > 0 {
			fmt.Println("  finished", res.FinishedIDs)
		}
	}
	// Output:
	// step 0: 40 tokens
	//   new a: 40 tokens, prefix hit 0, blocks [1 2 3]
	// step 1: 5 tokens
	//   new b: 4 tokens, prefix hit 32, blocks [1 2 4]
	//   cached a: 1 tokens, decode=true
	//   finished [a b]
}

// Async scheduling: step 1 is scheduled before step 0's output is known.
func Example_async() {
	s, _ := sched.New(sched.Config{
		MaxNumSeqs: 8, MaxNumBatchedTokens: 64, BlockSize: 16, NumGPUBlocks: 33,
		MaxModelLen: 512, ChunkedPrefill: true,
	})
	s.Add(&sched.Request{ID: "a", PromptTokens: 20, MaxOutputTokens: 3})
	prev := s.Schedule()
	for prev != nil {
		next := s.Schedule() // while prev "runs"
		res := s.Update(prev)
		fmt.Printf("updated step %d: sampled %d, finished %v; next step %d has %d requests\n",
			prev.StepID, res.Sampled, res.FinishedIDs, next.StepID, next.NumScheduledReqs())
		prev = nil
		if !next.Empty() {
			prev = next
		}
	}
	// Output:
	// updated step 0: sampled 1, finished []; next step 1 has 1 requests
	// updated step 1: sampled 1, finished []; next step 2 has 1 requests
	// updated step 2: sampled 1, finished [a]; next step -1 has 0 requests
}
