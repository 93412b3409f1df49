package fpm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDecodeAttnKV: the decode attention term prices a uniform batch at its
// KV tokens and a ragged one by its longest request while the batch's
// programs fit in one wave (SplitKVLength), by its mean over many waves.
func TestDecodeAttnKV(t *testing.T) {
	name := DecodeAttnKV(132, 3, 8) // a wave of 396 programs: 49.5 requests of 8 KV heads
	require.Equal(t, "decode_attn_kv(sms=132,per_sm=3,kv_heads=8)", name)
	fn, err := Term(name)
	require.NoError(t, err)
	for _, tc := range []struct {
		name          string
		b, sum, max   float64
		want          float64
		wantAsDecodes string
	}{
		{"uniform", 16, 16 * 1000, 1000, 16 * 1000, "decode_kv_tokens"},
		{"ragged, one wave: the longest", 16, 16 * 1000, 4000, 16 * 4000, "B × longest"},
		{"ragged, 2 waves: the longest over the waves", 99, 99 * 1000, 4000, 99 * 4000 * 396 / (99 * 8), "B × longest × wave / programs"},
		{"ragged, many waves: the mean", 400, 400 * 1000, 4000, 400 * 1000, "decode_kv_tokens"},
		{"no decodes", 0, 0, 0, 0, "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fn(Features{DecodeRequests: tc.b, DecodeKVTokens: tc.sum, DecodeMaxKVTokens: tc.max})
			require.InDelta(t, tc.want, got, 1e-6, tc.wantAsDecodes)
		})
	}
	for _, bad := range []string{"decode_attn_kv(sms=132,kv_heads=8)", "decode_attn_kv(sms=0,per_sm=3,kv_heads=8)",
		"decode_attn_kv(sms=132,per_sm=3,kv_heads=8)x", "decode_attn_kv(sms=132, per_sm=3,kv_heads=8)", "decode_attn_kv(sms=-1,per_sm=3,kv_heads=8)"} {
		_, err := Term(bad)
		require.ErrorContains(t, err, "want decode_attn_kv(sms=S,per_sm=P,kv_heads=H)", bad)
	}
	_, err = Term("decode_attn_kv")
	require.ErrorContains(t, err, "unknown term", "the bare name is the recipe's placeholder, not a term")
}

// FuzzTermName: any name resolves or is refused, never panics; a resolved
// decode attention term is written as DecodeAttnKV writes it (an experts
// term: ExpertsReached, checked when it resolves).
func FuzzTermName(f *testing.F) {
	for _, s := range []string{DecodeAttnKV(132, 3, 8), "decode_attn_kv(sms=1,per_sm=1,kv_heads=1)", "const", "decode_attn_kv(", "decode_attn_kv(sms=99999999999999999999,per_sm=1,kv_heads=1)",
		"experts_reached(experts=128,top_k=8)", "experts_reached(experts=16,top_k=4,skew=0.3,logit_std=0.32)", "experts_reached(experts=99999999,top_k=1)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		fn, err := Term(name)
		if err != nil {
			return
		}
		v := fn(Features{DecodeRequests: 3, DecodeKVTokens: 300, DecodeMaxKVTokens: 200})
		require.False(t, v < 0, "%s: %v", name, v)
		if strings.HasPrefix(name, TermDecodeAttnKV+"(") {
			var sms, perSM, kvh int
			_, err := fmtSscan(name, &sms, &perSM, &kvh)
			require.NoError(t, err)
			require.Equal(t, DecodeAttnKV(sms, perSM, kvh), name)
		}
	})
}

func fmtSscan(name string, sms, perSM, kvh *int) (int, error) {
	return fmt.Sscanf(strings.TrimPrefix(name, TermDecodeAttnKV+"("), "sms=%d,per_sm=%d,kv_heads=%d)", sms, perSM, kvh)
}
