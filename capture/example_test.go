package capture_test

import (
	"fmt"

	"github.com/steplab/steplab/capture"
)

// What a decode step ships to the worker, by how its requests arrive: an
// admission step carries every request in full (its prompt's token ids
// and block ids: scheduled_new_reqs), a steady step only each request's
// deltas (scheduled_cached_reqs). At B=513 requests of 4,096 tokens this is
// the gap behind admission-step contamination of self-benchmarks (vLLM's
// own encoding measured 8.5 MB against 6.8 KB; this is the worker's
// msgpack, docs/architecture.md#why-it-exists).
func ExampleFrame() {
	const batch, ctx, blockSize = 513, 4096, 16
	news := make([]capture.NewRequestData, batch)
	cached := capture.CachedRequestData{}
	for r := range news {
		id := fmt.Sprintf("req-%d", r)
		prompt := make([]int32, ctx)
		for i := range prompt {
			prompt[i] = int32((r*ctx + i) * 7919 % 128000) // token ids of a 128K vocabulary
		}
		blocks := make([]int, ctx/blockSize)
		for i := range blocks {
			blocks[i] = r*len(blocks) + i
		}
		news[r] = capture.NewRequestData{ReqID: id, PromptTokenIDs: prompt, BlockIDs: blocks, NumComputedTokens: ctx - 1}
		cached.ReqIDs = append(cached.ReqIDs, id)
		cached.NewTokenIDs = append(cached.NewTokenIDs, []int{int(prompt[ctx-1])})
		cached.NewBlockIDs = append(cached.NewBlockIDs, nil)
		cached.NumComputedTokens = append(cached.NumComputedTokens, ctx)
		cached.NumOutputTokens = append(cached.NumOutputTokens, 1)
	}
	admission, err := capture.Frame(news)
	if err != nil {
		fmt.Println(err)
		return
	}
	steady, err := capture.Frame(cached)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("admission step: %.1f MB\nsteady step: %.1f KB\n", float64(len(admission))/1e6, float64(len(steady))/1e3)
	// Output:
	// admission step: 11.1 MB
	// steady step: 9.2 KB
}
