package features_test

import (
	"fmt"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/features"
)

// A step of three decodes (one long) and a prompt chunk at a cached
// context, recorded as the simulator records it and read back.
func ExampleOf() {
	var b features.Batch
	for _, ctx := range []int64{300, 500, 4000} {
		b.Decode(ctx)
	}
	b.Prefill(512, 2048, 2560) // 512 new tokens after a 2,048-token prefix hit
	b.New(2560)
	st := datasets.Step{Kind: datasets.KindMixed, NumNewReqs: 1}
	b.Fill(&st)
	f := features.Of(&st)
	fmt.Println(f.Kind(), f.DecodeRequests, f.DecodeKVTokens, f.DecodeMaxKVTokens, f.PrefillAttn)
	// Output: mixed 3 4800 4000 1.179648e+06
}

// A row written before max_decode_kv_tokens existed: the longest context is
// unknown unless the contexts were equal, until its step_requests complete
// it.
func ExampleBatch_Complete() {
	old := datasets.Step{Kind: datasets.KindDecode, NumDecodeRequests: 2, SumDecodeKVTokens: 1100, VarDecodeKVTokens: 202500,
		MaxDecodeKVTokens: datasets.Unknown, SumPrefillAttn: -1, NewReqTokens: datasets.Unknown, CUDAGraphSize: -1}
	fmt.Println(features.Of(&old).Unknown())
	rows := []datasets.StepRequest{{NumScheduledTokens: 1, NumComputedTokens: 100}, {NumScheduledTokens: 1, NumComputedTokens: 1000}}
	var b features.Batch
	for i := range rows {
		b.Add(&rows[i])
	}
	b.Complete(&old)
	fmt.Println(features.Of(&old).DecodeMaxKVTokens)
	// Output:
	// [max_decode_kv_tokens]
	// 1000
}
