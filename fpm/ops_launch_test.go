package fpm

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
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

// launchDB is tinyDB with eager GEMM rows (3× the graph latency) and an
// element-wise table of every op in both launches over the tiny shape's
// widths.
func launchDB() *OpDB {
	db := tinyDB()
	for _, r := range db.GEMM {
		r.Eager, r.LatencyMs = true, 3*r.LatencyMs
		db.GEMM = append(db.GEMM, r)
	}
	for _, op := range ElementwiseOps {
		for _, n := range []int{16, 32, 64, 96, 128} {
			for _, m := range []int{1, 4, 16, 64, 256} {
				for _, eager := range []bool{false, true} {
					db.Elementwise = append(db.Elementwise, ElementwiseRow{Op: op, M: m, N: n, DType: "bfloat16", Eager: eager,
						LatencyMs: ewMs(float64(m), float64(n), eager)})
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
func hostDB(hostMs float64) *OpDB {
	db := launchDB()
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
