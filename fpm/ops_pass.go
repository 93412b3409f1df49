package fpm

import (
	"math"
	"slices"
)

// The steps of a decoder layer's pass other than its element-wise
// operations (which are their index in ElementwiseOps).
const (
	stepQKV       = -1 - iota // the q/k/v projection
	stepAttention             // the step's attention, one launch for its prefill and decode requests
	stepOProj                 // the output projection
	stepMLPIn                 // the gate/up GEMM; a mixture of experts priced from its MoE table: the router
	stepMLPOut                // the down GEMM; a mixture of experts priced from its MoE table: the fused layer
)

// unfusedLayer is one decoder layer's pass in the order the worker issues
// it (model.py), every element-wise operation on its own: the pass's first
// norm is the layer's own; its last residual add is followed by the next
// layer's norm.
var unfusedLayer = [...]int{ewRMSNorm, stepQKV, ewRoPE, ewKVWrite, stepAttention, stepOProj, ewResidualAdd, ewRMSNorm,
	stepMLPIn, ewSiLUMul, stepMLPOut, ewResidualAdd}

// Indexes of ElementwiseOps.
const (
	ewRMSNorm = iota
	ewResidualAdd
	ewRoPE
	ewKVWrite
	ewSiLUMul
	ewEmbedding
	ewAddRMSNorm
	ewRoPEKVWrite
)

// opsPass is the pass a prior composes: one layer's steps, each pair of
// consecutive element-wise operations that a fusion the database measured
// runs as one kernel replaced by it, the fusions spanning two layers too.
type opsPass struct {
	layer []int
	// wrap is the fusion of a layer's last step with the next layer's
	// first (an ElementwiseOps index; -1: none). It opens layer, so the
	// first layer runs its second part alone instead and the last layer
	// ends with its first part alone.
	wrap      int
	wrapParts [2]int
	// moeTable: the MoE layers are priced from the fused-MoE table, which
	// runs their activation (the pass has no silu_mul of its own).
	moeTable bool
}

// newOpsPass resolves the pass for a database that measures the
// element-wise operations measured says it does, moeTable as opsPass's.
func newOpsPass(measured func(k int) bool, moeTable bool) opsPass {
	steps := unfusedLayer[:]
	if moeTable {
		steps = slices.DeleteFunc(slices.Clone(steps), func(k int) bool { return k == ewSiLUMul })
	}
	p := opsPass{wrap: -1, moeTable: moeTable}
	n := len(steps)
	if f, parts := fusionOf(steps[n-1], steps[0], measured); f >= 0 {
		p.wrap, p.wrapParts = f, parts
		p.layer = append(p.layer, f)
		steps = steps[1 : n-1]
	}
	for i := 0; i < len(steps); i++ {
		if i+1 < len(steps) {
			if f, _ := fusionOf(steps[i], steps[i+1], measured); f >= 0 {
				p.layer = append(p.layer, f)
				i++
				continue
			}
		}
		p.layer = append(p.layer, steps[i])
	}
	return p
}

// fusionOf is the measured fusion of steps a then b, and its parts; -1
// when none runs them.
func fusionOf(a, b int, measured func(k int) bool) (int, [2]int) {
	if a < 0 || b < 0 {
		return -1, [2]int{}
	}
	for _, f := range ElementwiseFusions {
		k := slices.Index(ElementwiseOps, f.Op)
		parts := [2]int{slices.Index(ElementwiseOps, f.Parts[0]), slices.Index(ElementwiseOps, f.Parts[1])}
		if parts == [2]int{a, b} && measured(k) {
			return k, parts
		}
	}
	return -1, [2]int{}
}

// ewWidth is the width element-wise operation k runs over per token
// (ElementwiseOps' N).
func (s *opsShape) ewWidth(k int) float64 {
	switch k {
	case ewRoPE:
		return float64((s.qHeads + s.kvHeads) * s.headDim)
	case ewKVWrite:
		return float64(s.kvHeads * s.headDim)
	case ewRoPEKVWrite:
		return float64((s.qHeads + 2*s.kvHeads) * s.headDim)
	case ewSiLUMul:
		return float64(s.activationWidth())
	}
	return float64(s.hidden)
}

// elementwiseTableNs is a step's element-wise work over rows tokens, of
// which sampled reach the LM head, from the measured table: the pass's
// element-wise steps in every layer, once the embedding gather and the
// final norm over the sampled rows.
func (o *Ops) elementwiseTableNs(li *launchIndex, rows, sampled float64) (float64, bool) {
	sh, p := &o.shape, &o.pass
	ext := false
	op := func(k int, m, n float64) float64 {
		t := li.ew[k]
		if t == nil || m <= 0 {
			return 0
		}
		ns, x := t.lookup(opCoords{n, m}, elementwiseCost{})
		ext = ext || x
		return ns
	}
	var layer float64
	for _, k := range p.layer {
		if k >= 0 {
			layer += op(k, rows, sh.ewWidth(k))
		}
	}
	h := float64(sh.hidden)
	ns := float64(sh.layers)*layer + op(ewEmbedding, rows, h) + op(ewRMSNorm, sampled, h)
	if f := p.wrap; f >= 0 {
		// The first layer opens with the fusion's second part, the last
		// closes with its first: one fused call fewer than layers.
		a, b := p.wrapParts[0], p.wrapParts[1]
		ns += op(a, rows, sh.ewWidth(a)) + op(b, rows, sh.ewWidth(b)) - op(f, rows, sh.ewWidth(f))
	}
	if p.moeTable && sh.denseLayers > 0 && sh.inter > 0 {
		ns += float64(sh.denseLayers) * op(ewSiLUMul, rows, float64(sh.inter)) // the dense layers' own activation
	}
	return ns, ext
}

// hostWaitNs is how long the device of an eager step waits for the host:
// the host issues the pass's operations one after another (the eager
// rows' host times) while the device runs each once it is issued and the
// one before it has ended (the graph rows' device times), a stream with a
// deep launch queue: issue(i) = Σ host(≤ i), start(i) = max(issue(i),
// end(i−1)), end(i) = start(i) + device(i). The step ends at end(last);
// what exceeds the device times' sum is the wait. The pass is the
// embedding, every layer's steps (opsPass) and the final norm and the LM
// head. qkvNs and projNs are a layer's projection GEMMs as price found
// them.
func (o *Ops) hostWaitNs(f *Features, rows, sampled, qkvNs, projNs float64, b *OpsBreakdown) float64 {
	sh, e, p := &o.shape, &o.engine, &o.pass
	g, h := &o.db.launch[launchGraph], &o.db.host
	L := float64(sh.layers)
	hostGEMM := func(role int, m float64, n, k int) float64 {
		ns, _ := o.gemmNs(h, role, m, n, k)
		return ns
	}
	gemm := func(role int, m float64, n, k int) (dev, host float64) {
		dev, _ = o.gemmNs(g, role, m, n, k)
		return dev * orOne(e.GEMMScale), hostGEMM(role, m, n, k)
	}
	ew := func(k int, m float64) [2]float64 {
		if g.ew == nil || g.ew[k] == nil || m <= 0 {
			return [2]float64{}
		}
		n := sh.ewWidth(k)
		dev, _ := g.ew[k].lookup(opCoords{n, m}, elementwiseCost{})
		var host float64
		if h.ew != nil && h.ew[k] != nil {
			host, _ = h.ew[k].lookup(opCoords{n, m}, elementwiseCost{})
		}
		return [2]float64{dev, host}
	}
	// The attention's host time is one launch's, looked up where the
	// device's is (not scaled by the share of the table's work it does).
	var attnHost float64
	if f.PrefillTokens > 0 {
		q, _ := o.contextCoords(f)
		attnHost, _ = h.ctx.lookup(q, (*contextCost)(o))
	} else if f.DecodeRequests > 0 {
		attnHost, _ = o.generationAttnNs(h, f.DecodeRequests, o.decodeKV(f))
	}
	// The MLP's device time (a layer's GEMMs less the attention
	// projections). A dense layer's splits between its two GEMMs as their
	// lookups do; a mixture of experts priced as expert GEMMs runs more,
	// smaller ones, and its host time is taken as a dense layer's two
	// launches; one priced from its MoE table runs the router, then the
	// fused layer.
	mlp := b.GEMMNs/L - qkvNs - projNs
	var in, out [2]float64
	if p.moeTable {
		in[0], in[1] = gemm(roleHead, rows, sh.experts, sh.hidden)
		out[0] = math.Max(0, mlp-in[0])
		if h.moe != nil {
			out[1], _ = h.moe.lookup(opCoords{rows}, &o.moeSol)
		}
	} else {
		in[0], in[1] = gemm(roleMLP, rows, 2*sh.activationWidth(), sh.hidden)
		out[0], out[1] = gemm(roleMLP, rows, sh.hidden, sh.activationWidth())
		if sum := in[0] + out[0]; sum > 0 {
			in[0], out[0] = mlp*in[0]/sum, mlp*out[0]/sum
		}
	}
	out[0] += b.AllReduceNs / 2 / L
	var layer [len(unfusedLayer)][2]float64
	for i, k := range p.layer {
		switch k {
		case stepQKV:
			layer[i] = [2]float64{qkvNs, hostGEMM(roleAttn, rows, (sh.qHeads+2*sh.kvHeads)*sh.headDim, sh.hidden)}
		case stepAttention:
			layer[i] = [2]float64{(b.ContextAttnNs + b.GenerationAttnNs + b.AllReduceNs/2) / L, attnHost}
		case stepOProj:
			layer[i] = [2]float64{projNs, hostGEMM(roleAttn, rows, sh.hidden, sh.qHeads*sh.headDim)}
		case stepMLPIn:
			layer[i] = in
		case stepMLPOut:
			layer[i] = out
		default:
			layer[i] = ew(k, rows)
		}
	}

	var issue, end, busy float64
	step := func(op [2]float64) {
		issue += op[1]
		end = math.Max(issue, end) + op[0]
		busy += op[0]
	}
	step(ew(ewEmbedding, rows))
	for l := range sh.layers {
		for i := range p.layer {
			if l == 0 && i == 0 && p.wrap >= 0 {
				step(ew(p.wrapParts[1], rows))
				continue
			}
			step(layer[i])
		}
	}
	if p.wrap >= 0 {
		step(ew(p.wrapParts[0], rows))
	}
	step(ew(ewRMSNorm, sampled))
	lmDev, lmHost := gemm(roleHead, sampled, sh.vocab, sh.hidden)
	step([2]float64{lmDev, lmHost})
	return math.Max(0, end-busy)
}
