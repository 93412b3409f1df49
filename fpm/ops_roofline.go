package fpm

import (
	"fmt"
	"github.com/steplab/steplab/catalog"
	"math"
	"sort"
)

// RooflineEfficiency is what a kernel database says about the fractions
// of a GPU's peaks the roofline prior's kernels reach (Roofline's GEMMEff,
// WeightBWEff, AttnEff, KVBWEff and all-reduce parameters), read off the
// measured kernels of one model shape: every value is measured work over
// measured time over the hardware's datasheet peak, no fit involved.
type RooflineEfficiency struct {
	// GEMM is the fraction of peak FLOPS the shape's layer GEMMs (q/k/v,
	// output projection, MLP) reach together, by token count m: low at
	// small m, where they stream weights, rising to the compute-bound
	// efficiency.
	GEMM []CurvePoint `json:"gemm"`
	// WeightBW is the fraction of HBM bandwidth those GEMMs reach
	// streaming their weights at one token.
	WeightBW float64 `json:"weight_bw"`
	// Attn is the fraction of peak FLOPS causal context attention reaches
	// over one prompt, by prompt length.
	Attn []CurvePoint `json:"attn"`
	// KVBW is the best fraction of HBM bandwidth decode attention reaches
	// reading the KV cache over the measured batches and lengths, at
	// KVBWAt (batch, KV length).
	KVBW   float64    `json:"kv_bw"`
	KVBWAt [2]float64 `json:"kv_bw_at"`
	// AllReduce is the CUDA-graph all-reduce per TP degree measured.
	AllReduce []AllReduceEfficiency `json:"allreduce,omitempty"`
}

// CurvePoint is one point of a piecewise-linear curve.
type CurvePoint struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// AllReduceEfficiency is the all-reduce over GPUs GPUs: its latency at the
// smallest measured message, and the fraction of the interconnect
// bandwidth its ring moves at the largest.
type AllReduceEfficiency struct {
	GPUs       int     `json:"gpus"`
	LatencyNs  float64 `json:"latency_ns"`
	BWFraction float64 `json:"bw_fraction"`
}

// FitRooflineEfficiency reads the roofline's efficiencies for shape s on
// hw (whose datasheet peaks the fractions are of) off a database; the
// curves are sampled at the database's measured token counts and prompt
// lengths.
func FitRooflineEfficiency(db *OpDB, hw catalog.Hardware, s catalog.Shape) (RooflineEfficiency, error) {
	if err := hw.Validate(); err != nil {
		return RooflineEfficiency{}, err
	}
	o, err := NewOps(db, s)
	if err != nil {
		return RooflineEfficiency{}, err
	}
	sh := &o.shape
	li := &o.db.launch[launchGraph]
	peak, bw := hw.PeakFLOPs(), hw.BandwidthBytes()
	var out RooflineEfficiency

	// Layer GEMMs as (n, k) pairs; MLP as the dense model runs it.
	type nk struct{ n, k int }
	gemms := []nk{{(sh.qHeads + 2*sh.kvHeads) * sh.headDim, sh.hidden}, {sh.hidden, sh.qHeads * sh.headDim},
		{2 * sh.inter, sh.hidden}, {sh.hidden, sh.inter}}
	layer := func(m float64) (flops, bytes, ns float64) {
		for _, g := range gemms {
			t, _ := o.gemmNs(li, roleMLP, m, g.n, g.k)
			flops += 2 * m * float64(g.n) * float64(g.k)
			bytes += float64(g.n) * float64(g.k) * sh.weightBytes
			ns += t
		}
		return flops, bytes, ns
	}
	for _, m := range distinct(db.GEMM, func(r GEMMRow) (int, bool) { return r.M, r.DType == sh.dtype }) {
		flops, _, ns := layer(float64(m))
		out.GEMM = append(out.GEMM, CurvePoint{float64(m), flops / (ns * 1e-9) / peak})
	}
	if len(out.GEMM) == 0 {
		return out, fmt.Errorf("opdb %s: no %s GEMMs", db.Name, sh.dtype)
	}
	_, bytes, ns := layer(1)
	out.WeightBW = bytes / (ns * 1e-9) / bw

	for _, seq := range distinct(db.ContextAttention, func(r AttentionRow) (int, bool) { return r.SeqLen, r.KVDType == sh.kvDType }) {
		t, _ := o.contextAttnNs(li, &Features{PrefillTokens: float64(seq), PrefillRequests: 1})
		flops := 4 * float64(sh.qHeads*sh.headDim) * float64(seq) * float64(seq) / 2
		out.Attn = append(out.Attn, CurvePoint{float64(seq), flops / (t * 1e-9) / peak})
	}

	for _, r := range db.GenerationAttention {
		if r.KVDType != sh.kvDType || r.Window != 0 {
			continue
		}
		t, _ := o.generationAttnNs(li, float64(r.Batch), float64(r.SeqLen))
		kv := float64(r.Batch) * float64(r.SeqLen) * 2 * float64(sh.kvHeads*sh.headDim) * sh.kvBytes
		if f := kv / (t * 1e-9) / bw; f > out.KVBW {
			out.KVBW, out.KVBWAt = f, [2]float64{float64(r.Batch), float64(r.SeqLen)}
		}
	}

	if link, ok := hw.TPLink(); ok {
		for _, g := range distinct(db.AllReduce, func(r AllReduceRow) (int, bool) { return r.GPUs, r.Graph }) {
			lo, hi := math.Inf(1), 0.0
			var tLo, tHi float64
			for _, r := range db.AllReduce {
				if r.GPUs != g || !r.Graph {
					continue
				}
				if m := float64(r.MessageBytes); m < lo {
					lo, tLo = m, r.LatencyMs*1e6
				}
				if m := float64(r.MessageBytes); m > hi {
					hi, tHi = m, r.LatencyMs*1e6
				}
			}
			ring := ringCost{}.sol(opCoords{float64(g), hi})
			out.AllReduce = append(out.AllReduce, AllReduceEfficiency{GPUs: g, LatencyNs: tLo,
				BWFraction: ring / (tHi * 1e-9) / (link.GBsPerDirection * 1e9)})
		}
	}
	return out, nil
}

// distinct returns the sorted distinct values key picks from the rows it
// keeps.
func distinct[R any](rows []R, key func(R) (int, bool)) []int {
	seen := map[int]bool{}
	var out []int
	for _, r := range rows {
		if v, ok := key(r); ok && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Ints(out)
	return out
}
