package fpm

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/catalog"
)

// ewMs is the synthetic element-wise law of the test database: linear in
// elements, doubled when launched eagerly (the host's dispatch).
func ewMs(m, n float64, eager bool) float64 {
	ms := 1e-6 * m * n
	if eager {
		ms *= 2
	}
	return ms
}

// fusedMs is the law of the fused operations: 1.5× a single pass's, less
// than their two parts together.
func fusedMs(m, n float64, eager bool) float64 { return 1.5 * ewMs(m, n, eager) }

// The element-wise operations of an engine that runs each on its own (the
// worker's torch path), and of one that fuses (its Triton path).
var (
	unfusedOps = []string{OpRMSNorm, OpResidualAdd, OpRoPE, OpKVWrite, OpSiLUMul, OpEmbedding}
	fusedOps   = []string{OpRMSNorm, OpResidualAdd, OpAddRMSNorm, OpRoPEKVWrite, OpSiLUMul, OpEmbedding}
)

// launchDB is tinyDB with eager GEMM rows (3× the graph latency) and an
// element-wise table of ops (unfusedOps when none is named) in both
// launches over the tiny shape's widths.
func launchDB(ops ...string) *OpDB {
	if len(ops) == 0 {
		ops = unfusedOps
	}
	db := tinyDB()
	for _, r := range db.GEMM {
		r.Eager, r.LatencyMs = true, 3*r.LatencyMs
		db.GEMM = append(db.GEMM, r)
	}
	for _, op := range ops {
		law := ewMs
		if slices.ContainsFunc(ElementwiseFusions, func(f ElementwiseFusion) bool { return f.Op == op }) {
			law = fusedMs
		}
		for _, n := range []int{16, 32, 64, 96, 128} {
			for _, m := range []int{1, 4, 16, 64, 256} {
				for _, eager := range []bool{false, true} {
					db.Elementwise = append(db.Elementwise, ElementwiseRow{Op: op, M: m, N: n, DType: "bfloat16", Eager: eager,
						LatencyMs: law(float64(m), float64(n), eager)})
				}
			}
		}
	}
	return db
}

func TestOpsLaunch(t *testing.T) {
	o, err := NewOps(launchDB(), tiny)
	require.NoError(t, err)
	f := Features{PrefillTokens: 60, PrefillRequests: 1, DecodeRequests: 4, DecodeKVTokens: 400, PaddedBatch: 4}
	rows := 64.0
	// tiny's element-wise work per layer: two norms and adds at hidden 64,
	// RoPE over (4+2)·16 = 96, the KV write over 2·16 = 32, SiLU·mul over
	// 128; once the embedding (64) and the final norm over the 5 sampled rows (a
	// row per request).
	elementwise := func(eager bool) float64 {
		layer := 4*ewMs(rows, 64, eager) + ewMs(rows, 96, eager) + ewMs(rows, 32, eager) + ewMs(rows, 128, eager)
		return (2*layer + ewMs(rows, 64, eager) + ewMs(5, 64, eager)) * 1e6
	}

	graph := o.Breakdown(f)
	require.False(t, graph.Eager, "no graph sizes known: the graph rows")
	require.InDelta(t, elementwise(false), graph.ElementwiseNs, 1e-6)
	require.InDelta(t, 2*tinyLayerGEMMMs(rows)*1e6, graph.GEMMNs, 1e-6)

	in := o.WithGraphs([]int{8, 64, 32}).Breakdown(f)
	require.False(t, in.Eager, "64 rows fit the largest graph")
	require.Equal(t, graph, in)

	eager := o.WithGraphs([]int{8, 32}).Breakdown(f)
	require.True(t, eager.Eager, "64 rows exceed the largest graph (32)")
	require.InDelta(t, elementwise(true), eager.ElementwiseNs, 1e-6)
	require.InDelta(t, 3*graph.GEMMNs, eager.GEMMNs, 1e-6, "the eager GEMM rows")
	require.InDelta(t, graph.GenerationAttnNs, eager.GenerationAttnNs, 1e-9, "no eager attention rows: the graph ones")
	require.Empty(t, eager.Extrapolated)

	// An op the table does not list is one the engine does not run.
	db := launchDB()
	db.Elementwise = slices.DeleteFunc(db.Elementwise, func(r ElementwiseRow) bool { return r.Op == OpRoPE })
	noRoPE, err := NewOps(db, tiny)
	require.NoError(t, err)
	require.InDelta(t, elementwise(false)-2*ewMs(rows, 96, false)*1e6, noRoPE.Breakdown(f).ElementwiseNs, 1e-6)

	// Rows measured one way only serve both launches (a CPU run times
	// eager calls only).
	eagerOnly := launchDB()
	eagerOnly.GEMM = slices.DeleteFunc(eagerOnly.GEMM, func(r GEMMRow) bool { return !r.Eager })
	eo, err := NewOps(eagerOnly, tiny)
	require.NoError(t, err)
	require.InDelta(t, 3*graph.GEMMNs, eo.Breakdown(f).GEMMNs, 1e-6)

	db.Elementwise = append(db.Elementwise, ElementwiseRow{Op: "layernorm", M: 1, N: 64, LatencyMs: 1})
	_, err = NewOps(db, tiny)
	require.ErrorContains(t, err, `unknown op "layernorm"`)
}

// A table that measures fused operations prices the pass they make: per
// layer two add+norm passes (the first of them the previous layer's
// residual add with this layer's norm), RoPE with the KV write, SiLU·mul;
// the first layer's norm alone, the last layer's residual add alone.
func TestOpsFusedElementwise(t *testing.T) {
	f := Features{PrefillTokens: 60, PrefillRequests: 1, DecodeRequests: 4, DecodeKVTokens: 400, PaddedBatch: 4}
	rows := 64.0
	// tiny: hidden 64, q/k/v width (4 + 2·2)·16 = 128, intermediate 128, 2
	// layers, 5 sampled rows.
	fused := func(eager bool) float64 {
		layer := 2*fusedMs(rows, 64, eager) + fusedMs(rows, 128, eager) + ewMs(rows, 128, eager)
		ends := ewMs(rows, 64, eager) + ewMs(rows, 64, eager) - fusedMs(rows, 64, eager)
		return (2*layer + ends + ewMs(rows, 64, eager) + ewMs(5, 64, eager)) * 1e6
	}
	for _, tc := range []struct {
		name string
		ops  []string
	}{
		{"the fused engine's table", fusedOps},
		{"fused and unfused rows: the fusions replace their parts", append(slices.Clone(fusedOps), OpRoPE, OpKVWrite)},
	} {
		o, err := NewOps(launchDB(tc.ops...), tiny)
		require.NoError(t, err, tc.name)
		require.InDelta(t, fused(false), o.Breakdown(f).ElementwiseNs, 1e-6, tc.name)
		require.InDelta(t, fused(true), o.WithGraphs([]int{32}).Breakdown(f).ElementwiseNs, 1e-6, tc.name)
	}

	// A fusion of the table whose parts it does not list: they are fused
	// away (cost nothing) where they run alone.
	only := launchDB(OpAddRMSNorm, OpRoPEKVWrite, OpSiLUMul, OpEmbedding)
	oo, err := NewOps(only, tiny)
	require.NoError(t, err)
	layer := 2*fusedMs(rows, 64, false) + fusedMs(rows, 128, false) + ewMs(rows, 128, false)
	require.InDelta(t, (2*layer-fusedMs(rows, 64, false)+ewMs(rows, 64, false))*1e6, oo.Breakdown(f).ElementwiseNs, 1e-6)
}

// The fused pass as the host issues it: tiny's pass is the embedding, 9
// operations in each of 2 layers (add+norm, q/k/v GEMM, RoPE with the KV
// write, attention, output GEMM, add+norm, up GEMM, SiLU·mul, down GEMM),
// the last layer's residual add, the final norm and the LM head: 22 calls.
func TestOpsFusedHostOverlap(t *testing.T) {
	f := Features{PrefillTokens: 60, PrefillRequests: 1, DecodeRequests: 4, DecodeKVTokens: 400, PaddedBatch: 4}
	slow, err := NewOps(withHost(launchDB(fusedOps...), 1), tiny)
	require.NoError(t, err)
	b := slow.WithGraphs([]int{32}).Breakdown(f)
	require.InDelta(t, 22e6+gemmMs(5, 256, 64)*1e6, b.TotalNs, 1e-3)
}

// An MoE layer priced from its table is the router and the fused layer,
// which runs its own activation: the pass has no SiLU·mul, and the host
// issues 10 steps a layer (no separate activation) plus the ends.
func TestOpsFusedMoELayer(t *testing.T) {
	moe := tiny
	moe.MoE = catalog.MoE{Experts: 8, TopK: 2, ExpertIntermediate: 32}
	moe.Intermediate = 0
	for _, ops := range [][]string{unfusedOps, fusedOps} {
		db := launchDB(ops...)
		for _, m := range []int{1, 4, 16, 64, 256} { // the router: 64 → 8 experts
			for _, k := range []int{32, 64} {
				lat := gemmMs(float64(m), 8, float64(k))
				db.GEMM = append(db.GEMM, GEMMRow{DType: "bfloat16", M: m, N: 8, K: k, LatencyMs: lat},
					GEMMRow{DType: "bfloat16", M: m, N: 8, K: k, Eager: true, LatencyMs: 3 * lat})
			}
		}
		for _, tok := range []int{1, 16, 256} {
			for _, eager := range []bool{false, true} {
				db.MoE = append(db.MoE, MoERow{DType: "bfloat16", Tokens: tok, Hidden: 64, Inter: 32, TopK: 2, Experts: 8, TP: 1, EP: 1,
					Distribution: "routing_skew_0", Eager: eager, LatencyMs: 1e-3 * float64(tok)})
			}
		}
		o, err := NewOps(withHost(db, 1), moe)
		require.NoError(t, err)
		require.Contains(t, o.Notes()[0], "under routing_skew_0 routing")
		rows := 64.0
		f := Features{PrefillTokens: 60, PrefillRequests: 1, DecodeRequests: 4, DecodeKVTokens: 400, PaddedBatch: 4}
		dense, err := NewOps(launchDB(ops...), tiny)
		require.NoError(t, err)
		silu := 2 * ewMs(rows, 128, false) * 1e6 // the dense model's SiLU·mul, 128 wide, in its two layers
		require.InDelta(t, dense.Breakdown(f).ElementwiseNs-silu, o.Breakdown(f).ElementwiseNs, 1e-6, "%v: no activation beside the MoE layer", ops)
		// A first dense layer (first_k_dense_replace) runs its own.
		firstDense := moe
		firstDense.Intermediate, firstDense.MoE.DenseLayers = 128, 1
		fd, err := NewOps(db, firstDense)
		require.NoError(t, err)
		require.InDelta(t, dense.Breakdown(f).ElementwiseNs-silu/2, fd.Breakdown(f).ElementwiseNs, 1e-6, "%v: the dense layer's activation", ops)
		calls := 27.0 - 2 // the unfused pass less the activation of each layer
		if ops[2] == OpAddRMSNorm {
			calls = 22 - 2
		}
		b := o.WithGraphs([]int{32}).Breakdown(f)
		require.InDelta(t, calls*1e6+gemmMs(5, 256, 64)*1e6, b.TotalNs, 1e-3, "%v", ops)
	}
}

// A ragged decode batch is priced at the uniform length whose time is its
// longest request's: max·min(1, SMs/(B·kv heads)), or its mean when longer.
func TestOpsDecodeKV(t *testing.T) {
	db := tinyDB()
	db.System.SMs = 16
	o, err := NewOps(db, tiny) // 2 KV heads
	require.NoError(t, err)
	for _, c := range []struct {
		name          string
		b, sum, maxKV float64
		want          float64
	}{
		{"one wave: the longest request", 4, 400, 300, 301},                // 8 programs <= 16 SMs
		{"two programs an SM: half the longest", 16, 1600, 300, 150.5},     // 32 programs
		{"many waves: the mean when it is longer", 64, 64 * 200, 300, 201}, // 300·16/128 = 37.5 < 201
		{"uniform batch: its length", 4, 400, 100, 101},                    // max = mean
		{"longest not recorded: the mean", 4, 400, math.NaN(), 101},
	} {
		f := Features{DecodeRequests: c.b, DecodeKVTokens: c.sum, DecodeMaxKVTokens: c.maxKV}
		require.InDelta(t, c.want, o.decodeKV(&f), 1e-9, c.name)
	}
	// Without the SM count the database prices the mean, as before.
	plain := tinyOps(t, tiny)
	f := Features{DecodeRequests: 4, DecodeKVTokens: 400, DecodeMaxKVTokens: 300}
	require.InDelta(t, 101, plain.decodeKV(&f), 1e-9)
	require.Greater(t, o.PredictNs(f), plain.PredictNs(f), "a ragged batch costs more than its mean")
}

// hostDB is launchDB whose eager rows record the host's issue time of
// every call, hostMs each, and that measures eager attention too.
func hostDB(hostMs float64) *OpDB { return withHost(launchDB(), hostMs) }

// withHost is db whose eager rows record the host's issue time of every
// call, hostMs each, with eager attention rows too.
func withHost(db *OpDB, hostMs float64) *OpDB {
	for i := range db.MoE {
		if db.MoE[i].Eager {
			db.MoE[i].HostMs = hostMs
		}
	}
	for i := range db.GEMM {
		if db.GEMM[i].Eager {
			db.GEMM[i].HostMs = hostMs
		}
	}
	for i := range db.Elementwise {
		if db.Elementwise[i].Eager {
			db.Elementwise[i].HostMs = hostMs
		}
	}
	for _, t := range []*[]AttentionRow{&db.ContextAttention, &db.GenerationAttention} {
		for _, r := range *t {
			r.Eager, r.HostMs = true, hostMs
			*t = append(*t, r)
		}
	}
	return db
}

// An eager step with host issue times is the device's work plus what it
// waits for the host: nothing to speak of when the host is fast, and the
// host's whole issue time (then the last operation) when it is slow.
func TestOpsHostOverlap(t *testing.T) {
	f := Features{PrefillTokens: 60, PrefillRequests: 1, DecodeRequests: 4, DecodeKVTokens: 400, PaddedBatch: 4}
	graphs := []int{32}
	device, err := NewOps(launchDB(), tiny)
	require.NoError(t, err)
	onDevice := device.Breakdown(f) // the graph rows: device time only

	fast, err := NewOps(hostDB(1e-6), tiny)
	require.NoError(t, err)
	b := fast.WithGraphs(graphs).Breakdown(f)
	require.True(t, b.Eager)
	require.InDelta(t, onDevice.TotalNs, b.TotalNs-b.HostWaitNs, 1e-6, "the device parts are the graph rows'")
	require.InDelta(t, 1, b.HostWaitNs, 1e-9, "a host issuing in 1 ns a call keeps ahead of the device after the first")

	slow, err := NewOps(hostDB(1), tiny)
	require.NoError(t, err)
	b = slow.WithGraphs(graphs).Breakdown(f)
	// tiny's pass: the embedding, 12 operations in each of 2 layers, the
	// final norm and the LM head: 27 calls of 1 ms each, then the LM
	// head's device time.
	lm := gemmMs(5, 256, 64) * 1e6
	require.InDelta(t, 27e6+lm, b.TotalNs, 1e-3)
	require.InDelta(t, b.TotalNs-onDevice.TotalNs, b.HostWaitNs, 1e-6)

	// Graph steps never wait for the host.
	require.Zero(t, slow.Breakdown(f).HostWaitNs)
}
