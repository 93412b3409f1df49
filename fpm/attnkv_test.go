package fpm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// worker64 is the piecewise worker's decode kernel on an H200: 64-token
// tiles, split to 2 × 132 programs, at most 16 ways.
var worker64 = DecodeKernel{TileTokens: 64, SplitPrograms: 264, SplitMax: 16}

// TestDecodeKernelSplits: the worker's num_splits at 8 KV heads.
func TestDecodeKernelSplits(t *testing.T) {
	for _, tc := range []struct {
		rows, want float64
	}{{1, 16}, {2, 16}, {4, 16}, {8, 8}, {16, 4}, {24, 2}, {32, 2}, {33, 1}, {48, 1}, {512, 1}} {
		require.Equal(t, tc.want, worker64.Splits(tc.rows, 8), "B=%v", tc.rows)
	}
	require.Equal(t, 1.0, DecodeKernel{TileTokens: 32}.Splits(1, 8), "no split target: no split")
	require.NoError(t, worker64.Validate())
	for _, bad := range []DecodeKernel{{TileTokens: -1}, {SplitPrograms: 264}, {SplitMax: 16}} {
		require.Error(t, bad.Validate(), "%+v", bad)
	}
}

// TestDecodeWalk: the walk of a batch's programs, wave 198 at 8 KV heads
// (a = 24.75 programs per KV head saturate the memory).
func TestDecodeWalk(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    Features
		k    DecodeKernel
		want float64
		why  string
	}{
		{"uniform, fills the wave", Features{DecodeRequests: 64, DecodeKVTokens: 64 * 1024, DecodeMaxKVTokens: 1024, PaddedBatch: 64}, worker64,
			64 * 1024, "decode_kv_tokens: no split at B=64, 64 ≥ 24.75 programs per KV head"},
		{"uniform, its last tile whole", Features{DecodeRequests: 64, DecodeKVTokens: 64 * 1000, DecodeMaxKVTokens: 1000, PaddedBatch: 64}, worker64,
			64 * 1024, "1,000 tokens walk 16 tiles"},
		{"uniform, token by token", Features{DecodeRequests: 64, DecodeKVTokens: 64 * 1000, DecodeMaxKVTokens: 1000, PaddedBatch: 64}, DecodeKernel{},
			64 * 1000, "no rule: no tiles, no split"},
		{"one request: split 16 ways, the wave's pace", Features{DecodeRequests: 1, DecodeKVTokens: 8192, DecodeMaxKVTokens: 8192, PaddedBatch: 1}, worker64,
			24.75 * 512, "16 programs of 512 tokens, fewer than the 24.75 that saturate"},
		{"ragged: the longest request's splits", Features{DecodeRequests: 32, DecodeKVTokens: 32 * 1000, DecodeMaxKVTokens: 4000, PaddedBatch: 32}, worker64,
			448*64 + 64*33 + (1984-512)*24.75 + 64*24.75, "2 splits; 31 requests of 903 tokens (512 + 448), one of 4,000 (2,048 + 1,984)"},
		{"padding rows split as the graph's batch", Features{DecodeRequests: 3, DecodeKVTokens: 3 * 8192, DecodeMaxKVTokens: 8192, PaddedBatch: 4}, worker64,
			3 * 8192, "the 4-row graph splits 16 ways: 48 programs per KV head saturate the memory"},
		{"unpadded, it splits 16 ways too", Features{DecodeRequests: 3, DecodeKVTokens: 3 * 8192, DecodeMaxKVTokens: 8192, PaddedBatch: 3}, worker64,
			3 * 8192, "11 ways round up to 16"},
		{"a larger graph splits fewer ways", Features{DecodeRequests: 2, DecodeKVTokens: 2 * 8192, DecodeMaxKVTokens: 8192, PaddedBatch: 8}, worker64,
			24.75 * 1024, "the 8-row graph splits 8 ways: 16 programs per KV head of 1,024 tokens, fewer than saturate"},
		{"the same batch unpadded", Features{DecodeRequests: 2, DecodeKVTokens: 2 * 8192, DecodeMaxKVTokens: 8192, PaddedBatch: 2}, worker64,
			2 * 8192, "16 ways: 32 programs per KV head saturate"},
		{"no decodes", Features{}, worker64, 0, "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.InDelta(t, tc.want, DecodeWalk(tc.f, 198, 8, tc.k), 1e-6, tc.why)
		})
	}
	// Raggedness costs: at one mean, a longer longest never walks less.
	prev := 0.0
	for _, longest := range []float64{1000, 1500, 3000, 6000, 15000} {
		f := Features{DecodeRequests: 20, DecodeKVTokens: 20 * 1000, DecodeMaxKVTokens: longest, PaddedBatch: 24}
		w := DecodeWalk(f, 198, 8, worker64)
		require.GreaterOrEqual(t, w, prev, "longest %v", longest)
		prev = w
	}
}

// TestDecodeAttnKV: the term is DecodeWalk under its spelling; the split
// regime's spelling of recipes fitted before it reads as it did.
func TestDecodeAttnKV(t *testing.T) {
	name := DecodeAttnKV(198, 8, worker64)
	require.Equal(t, "decode_attn_kv(wave=198,kv_heads=8,tile=64,split_programs=264,split_max=16)", name)
	require.Equal(t, "decode_attn_kv(wave=396,kv_heads=8)", DecodeAttnKV(396, 8, DecodeKernel{}))
	f := Features{DecodeRequests: 32, DecodeKVTokens: 32 * 1000, DecodeMaxKVTokens: 4000, PaddedBatch: 32}
	fn, err := Term(name)
	require.NoError(t, err)
	require.Equal(t, DecodeWalk(f, 198, 8, worker64), fn(f))
	fn, err = Term(DecodeAttnKV(396, 8, DecodeKernel{}))
	require.NoError(t, err)
	require.Equal(t, DecodeWalk(f, 396, 8, DecodeKernel{}), fn(f))

	old, err := Term("decode_attn_kv(sms=132,per_sm=3,kv_heads=8)") // a wave of 396 programs: 49.5 requests of 8 KV heads
	require.NoError(t, err)
	for _, tc := range []struct {
		name        string
		b, sum, max float64
		want        float64
	}{
		{"uniform", 16, 16 * 1000, 1000, 16 * 1000},
		{"ragged, one wave: the longest", 16, 16 * 1000, 4000, 16 * 4000},
		{"ragged, 2 waves: the longest over the waves", 99, 99 * 1000, 4000, 99 * 4000 * 396 / (99 * 8)},
		{"ragged, many waves: the mean", 400, 400 * 1000, 4000, 400 * 1000},
	} {
		require.InDelta(t, tc.want, old(Features{DecodeRequests: tc.b, DecodeKVTokens: tc.sum, DecodeMaxKVTokens: tc.max}), 1e-6, tc.name)
	}
	for _, bad := range []string{"decode_attn_kv(wave=198)", "decode_attn_kv(wave=0,kv_heads=8)", "decode_attn_kv(wave=198,kv_heads=8)x",
		"decode_attn_kv(wave=198, kv_heads=8)", "decode_attn_kv(wave=198,kv_heads=8,tile=64)", "decode_attn_kv(wave=198,kv_heads=8,tile=64,split_programs=264,split_max=0)",
		"decode_attn_kv(wave=198,kv_heads=8,tile=-64,split_programs=264,split_max=16)"} {
		_, err := Term(bad)
		require.ErrorContains(t, err, "want decode_attn_kv(wave=W,kv_heads=H[,tile=T,split_programs=N,split_max=M])", bad)
	}
	_, err = Term("decode_attn_kv(sms=0,per_sm=3,kv_heads=8)")
	require.ErrorContains(t, err, "want decode_attn_kv(sms=S,per_sm=P,kv_heads=H)")
	_, err = Term("decode_attn_kv")
	require.ErrorContains(t, err, "unknown term", "the bare name is the recipe's placeholder, not a term")
}

// FuzzTermName: any name resolves or is refused, never panics; a resolved
// decode attention term is written as DecodeAttnKV writes it (an experts
// term: ExpertsReached, checked when it resolves).
func FuzzTermName(f *testing.F) {
	for _, s := range []string{DecodeAttnKV(198, 8, worker64), DecodeAttnKV(1, 1, DecodeKernel{}), "decode_attn_kv(sms=132,per_sm=3,kv_heads=8)", "const",
		"decode_attn_kv(", "decode_attn_kv(wave=99999999999999999999,kv_heads=1)", "experts_reached(experts=128,top_k=8)",
		"experts_reached(experts=16,top_k=4,skew=0.3,logit_std=0.32)", "experts_reached(experts=99999999,top_k=1)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		fn, err := Term(name)
		if err != nil {
			return
		}
		v := fn(Features{DecodeRequests: 3, DecodeKVTokens: 300, DecodeMaxKVTokens: 200, DecodeKVVar: 100, PaddedBatch: 4})
		require.False(t, v < 0, "%s: %v", name, v)
		if rest, ok := strings.CutPrefix(name, TermDecodeAttnKV+"(wave="); ok {
			var wave, kvh int
			var k DecodeKernel
			n, _ := fmt.Sscanf(rest, "%d,kv_heads=%d,tile=%d,split_programs=%d,split_max=%d)", &wave, &kvh, &k.TileTokens, &k.SplitPrograms, &k.SplitMax)
			require.GreaterOrEqual(t, n, 2)
			require.Equal(t, DecodeAttnKV(wave, kvh, k), name)
		}
	})
}
