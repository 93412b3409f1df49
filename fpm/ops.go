package fpm

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"strings"

	"github.com/steplab/steplab/catalog"
)

// Ops is the measured-operations prior: it prices a step by composing the
// latencies of the operations one forward pass runs, looked up in a
// database of kernels measured on the GPU (OpDB), as AIConfigurator does.
// It needs no fit: the database and the model shape are all it reads.
//
// Per decoder layer, for a step of T prefill tokens (n chunks reading K
// cached tokens between them) and B decoding requests run as a batch of
// P ≥ B rows (the CUDA-graph size), over m = T + P rows:
//
//	GEMM(m, qkv) + GEMM(m, o) + MLP(m)
//	+ context attention: n requests of T/n new tokens after K/n cached
//	+ generation attention: B requests at their mean KV length
//	+ element-wise ops: two residual-add + RMSNorm passes, the SiLU·mul
//	+ two all-reduces of m·hidden activations when TP > 1
//
// and once per step the embedding gather, the final norm and the LM head
// over one row per request. A mixed step runs all of it in one pass: the
// weights are read once, the GEMMs see the prefill and decode rows
// together and each attention kernel prices its own requests
// (AIConfigurator's three-pass mixed-step composition). A dense MLP is
// GEMM(m, 2·inter) + GEMM(m, inter → hidden); a mixture of experts runs
// the expert GEMMs at the expected rows per expert over the expected
// number of experts the step's tokens touch.
//
// Lookups interpolate in log space between measured points and, past the
// measured grid, scale the nearest measured point by the operation's
// speed-of-light cost (see opTable); Breakdown names the operations that
// were extrapolated. The element-wise operations are read from the
// database's element-wise table when it has one (ElementwiseOps); without
// one they cost bytes/(bandwidth·scaling) plus a constant each, with the
// database's own system constants.
//
// A step of more rows than the engine's largest CUDA graph (WithGraphs)
// runs kernel by kernel from the host: it reads the database's eager rows
// where it has them, which include the host's dispatch.
//
// The database prices its framework's kernels; an engine running other
// kernels or other launch overheads is described by an OpsEngine.
type Ops struct {
	db   *opIndex
	name string
	// source is where the database was opened (OpDB.Source) and src the
	// shape it was built for: what an artifact of the prior records.
	source  string
	src     catalog.Shape
	shape   opsShape
	pass    opsPass
	engine  OpsEngine
	gemmSol [nGEMMRoles]gemmCost
	moeSol  moeCost
	// graphMax is the largest CUDA graph the engine captures, in rows (0:
	// not known, every step priced as the graph rows).
	graphMax float64
	// residuals, when set (a calibrated prior), give its predictions an
	// interval.
	residuals *ResidualQuantiles
	// nodes, for a tensor-parallel group spanning nodes (WithNodes), is
	// its layout and arEff the all-reduce efficiency its network leg is
	// priced at.
	nodes  collective
	arEff  catalog.Curve
	layout catalog.Layout
}

// OpsEngine is how the engine that runs a model departs from the
// framework whose kernels the database measured. The zero value is that
// framework itself. Every field is a measured property of an engine, to
// be fitted on a benchmark grid of it (fit.OpsEngine) and tested on other
// data; the values of steplab's own GPU worker and what they were fitted
// to are in docs/ops-prior.md.
type OpsEngine struct {
	// Name says which engine this is.
	Name string `json:"name,omitempty"`
	// GEMMScale, ContextAttnScale and GenerationAttnScale multiply the
	// database's GEMM (projections, MLP, LM head) and attention latencies:
	// the engine's kernels are other kernels or run at another clock.
	// 0 reads as 1.
	GEMMScale           float64 `json:"gemm_scale,omitempty"`
	ContextAttnScale    float64 `json:"context_attn_scale,omitempty"`
	GenerationAttnScale float64 `json:"generation_attn_scale,omitempty"`
	// GraphStepNs is added to a decode-only step (replayed from a CUDA
	// graph) and EagerStepNs to a step with prefill work (launched kernel
	// by kernel): per-step work the composition does not see, such as
	// unfused small kernels and the host's dispatch of an eager pass.
	GraphStepNs float64 `json:"graph_step_ns,omitempty"`
	EagerStepNs float64 `json:"eager_step_ns,omitempty"`
	// DecodeWave is, for an engine whose decode attention walks each
	// request's KV cache on one program per KV head once the batch fills
	// the GPU (the Triton kernels: vLLM's triton backend, steplab's
	// worker) where the database's kernel splits the walk (FlashAttention),
	// the programs the GPU runs at once (SMs × programs per SM): a ragged
	// batch then ends with its longest request (SplitKVLength). 0: the
	// database's kernel (its gpu.sm_count, else the mean context).
	DecodeWave float64 `json:"decode_wave,omitempty"`
}

// Validate refuses negative or non-finite fields.
func (e OpsEngine) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"gemm_scale", e.GEMMScale}, {"context_attn_scale", e.ContextAttnScale}, {"generation_attn_scale", e.GenerationAttnScale},
		{"graph_step_ns", e.GraphStepNs}, {"eager_step_ns", e.EagerStepNs}, {"decode_wave", e.DecodeWave}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return fmt.Errorf("fpm: ops engine %s: %s = %v: must be finite and >= 0", e.Name, f.name, f.v)
		}
	}
	return nil
}

func orOne(x float64) float64 {
	if x == 0 {
		return 1
	}
	return x
}

// NewOps builds the prior for a model shape from a database, for the
// database's own framework (see WithEngine). It refuses a shape whose
// dtypes the database did not measure, naming what it has.
func NewOps(db *OpDB, s catalog.Shape) (*Ops, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if len(s.Stack) > 0 || s.MoE.Latent > 0 || s.MLPMatrices != 0 {
		return nil, fmt.Errorf("shape %s: the operations prior prices uniform layers of full attention and gated MLPs; this model has per-layer kinds (a layer stack, latent experts or ungated MLPs): use fpm: roofline", s.Name)
	}
	sh := opsShapeOf(s)
	x, err := db.index(&sh)
	if err != nil {
		return nil, err
	}
	if sh.tp > 1 && x.allreduce == nil && !(x.sys.IntraNodeBandwidth > 0) {
		return nil, fmt.Errorf("opdb %s: TP=%d needs an all-reduce table or node.intra_node_bw", db.Name, sh.tp)
	}
	g := &x.launch[launchGraph]
	measured := func(k int) bool { return g.ew != nil && g.ew[k] != nil }
	o := &Ops{db: x, name: db.Name, source: db.Source, src: s, shape: sh, pass: newOpsPass(measured, sh.experts > 0 && g.moe != nil)}
	for r := range o.gemmSol {
		o.gemmSol[r] = gemmCost{flops: x.sys.BF16FLOPS, bandwidth: x.sys.MemBandwidth, bytes: sh.gemmBytes[r]}
	}
	o.moeSol = moeCost{gemmCost: o.gemmSol[roleExpert], hidden: float64(sh.hidden), inter: float64(sh.expertInter), experts: sh.experts, topK: sh.topK}
	return o, nil
}

// Notes says how the prior reads the database for this shape where that
// is not plain: per-part GEMM dtypes, and how the routed experts are
// priced.
func (o *Ops) Notes() []string {
	sh := &o.shape
	var out []string
	if sh.gemmDType[roleAttn] != sh.gemmDType[roleMLP] || sh.gemmDType[roleExpert] != sh.gemmDType[roleMLP] {
		out = append(out, fmt.Sprintf("ops: GEMMs looked up per part: attention projections %s, MLP %s, experts %s, LM head %s",
			sh.gemmDType[roleAttn], sh.gemmDType[roleMLP], sh.gemmDType[roleExpert], sh.gemmDType[roleHead]))
	}
	if l := o.layout; l.MultiNode() {
		out = append(out, fmt.Sprintf("ops: TP=%d spans %s: the all-reduce within a node is %s's table at %d GPUs, the leg between nodes the catalogue's network link (%g GB/s per GPU, %g µs a hop), not measured (flagged extrapolated)",
			l.GPUs, l, o.name, l.GPUsPerNode, l.Network.GBsPerDirection, l.Network.LatencyUs))
	}
	switch {
	case o.pass.moeTable:
		out = append(out, fmt.Sprintf("ops: routed experts from %s's fused MoE table (%s, %d experts, top-%d, TP %d) under %s routing",
			o.name, sh.gemmDType[roleExpert], sh.experts, sh.topK, sh.tp, o.db.moeRouting))
	case sh.experts > 0:
		out = append(out, fmt.Sprintf("ops: %s measured no fused MoE layer of this configuration: routed experts priced as %s GEMMs at the expected rows per touched expert (uniform routing)",
			o.name, sh.gemmDType[roleExpert]))
	}
	return out
}

// WithEngine returns the prior for an engine other than the database's
// framework.
func (o *Ops) WithEngine(e OpsEngine) (*Ops, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	c := *o
	c.engine = e
	return &c, nil
}

// WithGraphs returns the prior for an engine that captures CUDA graphs at
// sizes (rows: decode requests, or tokens of a step with prefill work):
// a step of more rows than the largest runs eagerly.
func (o *Ops) WithGraphs(sizes []int) *Ops {
	c := *o
	c.graphMax = 0
	for _, s := range sizes {
		c.graphMax = math.Max(c.graphMax, float64(s))
	}
	return &c
}

// WithNodes returns the prior for a tensor-parallel group laid out as l
// (catalog.Hardware.Layout), eff the hardware's all-reduce efficiency. A
// group spanning nodes all-reduces within each node as the database
// measured one node (its table at l.GPUsPerNode GPUs) and between nodes
// over l's network link by the roofline's model (collective), which no
// table measures: Breakdown flags the all-reduce extrapolated and Notes
// say so. On one node it is the prior unchanged.
func (o *Ops) WithNodes(l catalog.Layout, eff catalog.Curve) *Ops {
	if !l.MultiNode() {
		return o
	}
	c := *o
	c.nodes, c.arEff, c.layout = newCollective(l), eff, l
	return &c
}

// Engine is the engine the prior prices for.
func (o *Ops) Engine() OpsEngine { return o.engine }

// The operations prior's scalable terms (Scalable), in order: the engine
// scales of its GEMMs, prefill and decode attention.
var opsTerms = []string{PriorTermGEMM, PriorTermPrefillAttn, PriorTermDecodeAttn}

// ScaleTerms implements Scalable: gemm, prefill_attn and decode_attn.
func (o *Ops) ScaleTerms() []string { return append([]string(nil), opsTerms...) }

// ScaleValues implements Scalable: the engine's GEMM, context- and
// generation-attention scales.
func (o *Ops) ScaleValues() []float64 {
	e := &o.engine
	return []float64{orOne(e.GEMMScale), orOne(e.ContextAttnScale), orOne(e.GenerationAttnScale)}
}

// Scaled implements Scalable: the prior for an engine whose GEMM and
// attention scales are the present ones times mult.
func (o *Ops) Scaled(mult []float64) (Scalable, error) {
	if err := checkMult(opsTerms, mult); err != nil {
		return nil, err
	}
	v := o.ScaleValues()
	e := o.engine
	e.GEMMScale, e.ContextAttnScale, e.GenerationAttnScale = v[0]*mult[0], v[1]*mult[1], v[2]*mult[2]
	return o.WithEngine(e)
}

// WithResiduals implements Scalable.
func (o *Ops) WithResiduals(q *ResidualQuantiles) Scalable {
	c := *o
	c.residuals = q
	return &c
}

// Artifact implements Scalable: form ops, the database it was opened
// from, the shape and the engine. A database read from memory or
// assembled from an AIConfigurator tree has no place to point at, and is
// refused.
func (o *Ops) Artifact() (*Artifact, error) {
	if o.source == "" {
		return nil, fmt.Errorf("fpm: ops prior over %s: the database was not opened from a shipped name or a directory, so no artifact can point at it: write it as a database directory (docs/ops-prior.md) and use ops:DIR", o.name)
	}
	a, err := OpsArtifact(o.source, o.src, o.engine)
	if err != nil {
		return nil, err
	}
	a.Residuals = o.residuals
	return a, nil
}

// PredictIntervalNs implements IntervalFPM: the residual quantiles'
// spread around the prediction (none without residuals).
func (o *Ops) PredictIntervalNs(f Features, coverage float64) (mid, lo, hi float64) {
	mid = o.PredictNs(f)
	lo, hi = o.residuals.Interval(mid, coverage)
	return mid, lo, hi
}

// HasUncertainty reports whether the prior carries residuals.
func (o *Ops) HasUncertainty() bool { return o.residuals != nil && len(o.residuals.P) > 0 }

func (o *Ops) calibrated() bool {
	e := o.engine
	e.DecodeWave = 0 // the kernel's property, not a calibration
	return e != OpsEngine{}
}

// UnsplitDecode reports whether an attention backend's decode kernel walks
// each request's KV cache on one program per KV head once the batch fills
// the GPU (OpsEngine.DecodeWave): the Triton kernels (vLLM's TRITON_ATTN,
// steplab's worker), which split the walk only for small batches.
func UnsplitDecode(backend string) bool {
	return strings.HasPrefix(strings.ToLower(backend), "triton")
}

// SplitsDecode reports whether the database gives the SM count its
// ragged decode batches are priced with (gpu.sm_count).
func (o *Ops) SplitsDecode() bool { return o.db.sys.SMs > 0 }

// Database names the database the prior reads.
func (o *Ops) Database() string { return o.name }

// OpsBreakdown is a step priced by operation, in ns, engine scales
// applied; TotalNs is the sum.
type OpsBreakdown struct {
	GEMMNs           float64 `json:"gemm_ns"` // projections and MLP, all layers
	LMHeadNs         float64 `json:"lm_head_ns"`
	ContextAttnNs    float64 `json:"context_attn_ns"`
	GenerationAttnNs float64 `json:"generation_attn_ns"`
	ElementwiseNs    float64 `json:"elementwise_ns"` // norms, activation, residual adds, embedding
	AllReduceNs      float64 `json:"allreduce_ns"`
	EngineStepNs     float64 `json:"engine_step_ns"` // OpsEngine.GraphStepNs or EagerStepNs
	// HostWaitNs is the time the device of an eager step waits for the
	// host's dispatch, where the database records host issue times.
	HostWaitNs float64 `json:"host_wait_ns,omitempty"`
	TotalNs    float64 `json:"total_ns"`
	// Eager says the step ran kernel by kernel (more rows than the largest
	// CUDA graph).
	Eager bool `json:"eager,omitempty"`
	// Extrapolated lists the operations priced past the measured grid.
	Extrapolated []string `json:"extrapolated,omitempty"`
}

// Operations Breakdown can name as extrapolated, by bit.
const (
	extGEMM = 1 << iota
	extLMHead
	extContext
	extGeneration
	extAllReduce
	extElementwise
)

var extNames = []string{OpTableGEMM, "lm_head", OpTableContextAttention, OpTableGenerationAttention, OpTableAllReduce, OpTableElementwise}

// PredictNs implements FPM: the step's device time in ns. Admission
// features (NewRequests, NewReqTokens) are host work, not device time.
func (o *Ops) PredictNs(f Features) float64 {
	var b OpsBreakdown
	o.price(&f, &b)
	return b.TotalNs
}

// PredictExtNs implements Extrapolating: the step's device time and how
// many of its operations were priced past the measured grid.
func (o *Ops) PredictExtNs(f Features) (float64, int) {
	var b OpsBreakdown
	ext := o.price(&f, &b)
	return b.TotalNs, bits.OnesCount(uint(ext))
}

// Breakdown prices a step by operation.
func (o *Ops) Breakdown(f Features) OpsBreakdown {
	var b OpsBreakdown
	ext := o.price(&f, &b)
	for i, n := range extNames {
		if ext&(1<<i) != 0 {
			b.Extrapolated = append(b.Extrapolated, n)
		}
	}
	return b
}

// price fills b and returns the extrapolated operations as bits; it does
// not allocate (a simulator prices every step with it).
func (o *Ops) price(f *Features, b *OpsBreakdown) (ext int) {
	sh, e := &o.shape, &o.engine
	decodeRows := math.Max(f.DecodeRequests, f.PaddedBatch)
	rows := f.PrefillTokens + decodeRows
	if rows <= 0 {
		return 0
	}
	L := float64(sh.layers)
	flag := func(bit int, x bool) {
		if x {
			ext |= bit
		}
	}
	b.Eager = o.graphMax > 0 && rows > o.graphMax
	// An eager step reads the eager rows, or, where the database records
	// the host's issue times, the device times of the graph rows with the
	// host's dispatch overlapped (hostWaitNs).
	overlap := b.Eager && o.db.hostOK
	li := &o.db.launch[launchGraph]
	if b.Eager && !overlap {
		li = &o.db.launch[launchEager]
	}

	qkv, x1 := o.gemmNs(li, roleAttn, rows, (sh.qHeads+2*sh.kvHeads)*sh.headDim, sh.hidden)
	proj, x2 := o.gemmNs(li, roleAttn, rows, sh.hidden, sh.qHeads*sh.headDim)
	mlp, x3 := o.mlpNs(li, rows)
	router, x4 := o.routerNs(li, rows)
	b.GEMMNs = (L*(qkv+proj) + mlp + router) * orOne(e.GEMMScale)
	flag(extGEMM, x1 || x2 || x3 || x4)

	s := sampledRows(f)
	if s > 0 {
		lm, x := o.gemmNs(li, roleHead, s, sh.vocab, sh.hidden)
		b.LMHeadNs = lm * orOne(e.GEMMScale)
		flag(extLMHead, x)
	}
	if f.PrefillTokens > 0 {
		ns, x := o.contextAttnNs(li, f)
		b.ContextAttnNs = L * ns * orOne(e.ContextAttnScale)
		flag(extContext, x)
	}
	if f.DecodeRequests > 0 {
		ns, x := o.generationAttnNs(li, f.DecodeRequests, o.decodeKV(f))
		b.GenerationAttnNs = L * ns * orOne(e.GenerationAttnScale)
		flag(extGeneration, x)
	}
	ew, x := o.elementwiseNs(li, rows, s)
	b.ElementwiseNs = ew
	flag(extElementwise, x)
	if sh.tp > 1 {
		ar, x := o.allReduceNs(rows * float64(sh.hidden) * sh.actBytes)
		b.AllReduceNs = 2 * L * ar
		if sh.qkNormAcross {
			// The q and k norms' variances, one fp32 each per token.
			v, xv := o.allReduceNs(rows * 2 * 4)
			b.AllReduceNs += L * v
			x = x || xv
		}
		flag(extAllReduce, x)
	}
	b.EngineStepNs = e.GraphStepNs
	if f.PrefillTokens > 0 {
		b.EngineStepNs = e.EagerStepNs
	}
	b.TotalNs = b.GEMMNs + b.LMHeadNs + b.ContextAttnNs + b.GenerationAttnNs + b.ElementwiseNs + b.AllReduceNs + b.EngineStepNs
	if overlap {
		b.HostWaitNs = o.hostWaitNs(f, rows, s, qkv*orOne(e.GEMMScale), proj*orOne(e.GEMMScale), b)
		b.TotalNs += b.HostWaitNs
	}
	return ext
}

// sampledRows is the LM head's rows: one per request, at its last
// scheduled position (a prefill chunk always belongs to a request).
func sampledRows(f *Features) float64 {
	s := f.PrefillRequests + f.DecodeRequests
	if f.PrefillTokens > 0 && f.PrefillRequests < 1 {
		s++
	}
	return s
}

// elementwiseNs is the element-wise work of a step over rows tokens, of
// which sampled reach the LM head: from the measured table where the
// database has one (elementwiseTableNs). Without one, AIConfigurator's
// formula: per layer two fused residual-add + RMSNorm passes (2·hidden in
// and out) and the SiLU·mul activation (2·inter in, inter out); once the
// embedding gather and the final norm.
func (o *Ops) elementwiseNs(li *launchIndex, rows, sampled float64) (float64, bool) {
	if li.ew != nil {
		return o.elementwiseTableNs(li, rows, sampled)
	}
	sh := &o.shape
	h := float64(sh.hidden)
	w := sh.actBytes
	addNorm := o.memOpNs(rows * 4 * h * w)
	act := o.memOpNs(rows * 3 * float64(sh.activationWidth()) * w)
	layer := 2*addNorm + act
	if sh.qkNormAcross {
		// The norms over every head: one pass for the variances, one
		// to scale q and k (the all-reduce between is allReduceNs').
		qk := rows * float64((sh.qHeads+sh.kvHeads)*sh.headDim) * w
		layer += o.memOpNs(qk) + o.memOpNs(2*qk)
	}
	return float64(sh.layers)*layer + o.memOpNs(rows*h*w) + addNorm, false
}

// elementwiseCost is an element-wise operation's speed of light, up to a
// constant: the elements it reads and writes.
type elementwiseCost struct{}

func (elementwiseCost) sol(c opCoords) float64 { return c[0] * c[1] }

// memOpNs prices an operation the database does not measure by the bytes
// it moves, as AIConfigurator's mem-op formula does.
func (o *Ops) memOpNs(bytes float64) float64 {
	s := &o.db.sys
	return (bytes/(s.MemBandwidth*s.MemBWScaling) + s.MemConstantS) * 1e9
}

// gemmNs is one GEMM of m rows by a k→n weight in role's dtype.
func (o *Ops) gemmNs(li *launchIndex, role int, m float64, n, k int) (float64, bool) {
	return li.gemm[role].lookup(opCoords{float64(n), float64(k), m}, &o.gemmSol[role])
}

// The speed-of-light cost of each operation, as a solver for its table.
type (
	contextCost    Ops
	generationCost Ops
)

// gemmCost is a GEMM's speed of light: its FLOPs at the tensor-core peak
// or its operand and result bytes (weights of bytes each) at the HBM
// bandwidth, whichever is longer.
type gemmCost struct{ flops, bandwidth, bytes float64 }

func (g *gemmCost) sol(c opCoords) float64 {
	n, k, m := c[0], c[1], c[2]
	return math.Max(2*m*n*k/g.flops, (m*k+n*k+m*n)*g.bytes/g.bandwidth)
}

// moeCost is a fused MoE layer's speed of light at c[0] tokens: the routed
// experts' FLOPs, or the weights of the experts the tokens touch.
type moeCost struct {
	gemmCost
	hidden, inter float64
	experts, topK int
}

func (e *moeCost) sol(c opCoords) float64 {
	t := c[0]
	w := 3 * e.hidden * e.inter
	return math.Max(2*t*float64(e.topK)*w/e.flops, catalog.ExpectedExperts(e.experts, e.topK, t)*w*e.bytes/e.bandwidth)
}

// mlpNs is every layer's MLP GEMMs over m rows: the dense layers' MLP,
// and in a mixture of experts the routed experts the rows touch plus the
// shared experts.
func (o *Ops) mlpNs(li *launchIndex, m float64) (float64, bool) {
	sh := &o.shape
	dense := func(width int) (float64, bool) {
		up, x1 := o.gemmNs(li, roleMLP, m, 2*width, sh.hidden)
		down, x2 := o.gemmNs(li, roleMLP, m, sh.hidden, width)
		return up + down, x1 || x2
	}
	ns, x := 0.0, false
	if sh.denseLayers > 0 && sh.inter > 0 { // width 0: a shape without MLPs
		d, xd := dense(sh.inter)
		ns, x = float64(sh.denseLayers)*d, xd
	}
	if sh.experts == 0 {
		return ns, x
	}
	moeLayers := float64(sh.layers - sh.denseLayers)
	var x1, x2 bool
	if li.moe != nil {
		var layer float64
		layer, x1 = li.moe.lookup(opCoords{m}, &o.moeSol)
		ns += moeLayers * layer
	} else {
		touched, per := expertLoad(m, sh.experts, sh.topK)
		var up, down float64
		up, x1 = o.gemmNs(li, roleExpert, per, 2*sh.expertInter, sh.hidden)
		down, x2 = o.gemmNs(li, roleExpert, per, sh.hidden, sh.expertInter)
		ns += moeLayers * touched * (up + down)
	}
	if sh.shared > 0 {
		d, xs := dense(sh.shared)
		ns += moeLayers * d
		x = x || xs
	}
	return ns, x || x1 || x2
}

// routerNs is the routers' GEMMs of the MoE layers over m rows: each
// token's hidden state to a logit per expert, at the activation dtype
// (AIConfigurator's router GEMM; an engine that runs it in fp32, as vLLM
// does MiniMax-M2's, takes longer).
func (o *Ops) routerNs(li *launchIndex, m float64) (float64, bool) {
	sh := &o.shape
	if sh.experts == 0 {
		return 0, false
	}
	ns, x := o.gemmNs(li, roleHead, m, sh.experts, sh.hidden)
	return float64(sh.layers-sh.denseLayers) * ns, x
}

// expertLoad is how m tokens routed to topK of E experts each spread over
// the experts: the expected number touched (ExpectedExperts, uniform
// routing) and the rows each of those runs.
func expertLoad(m float64, experts, topK int) (touched, rowsPer float64) {
	touched = catalog.ExpectedExperts(experts, topK, m)
	return touched, m * float64(topK) / touched
}

// contextAttnNs is one layer's prefill attention: the step's n chunks
// priced as n requests of mean chunk c after mean cached prefix k, from
// the table's full causal attention over c + k tokens scaled by the share
// of it the chunks compute, Σ c·(k + c/2) / (n·(c + k)²/2). That share
// prices the FLOPs; a short chunk after a long prefix is bound instead by
// reading the prefix's KV cache, as a decode of n requests over c + k
// keys is (a chunk of one token is one), so the step is priced at the
// longer of the two.
func (o *Ops) contextAttnNs(li *launchIndex, f *Features) (float64, bool) {
	q, share := o.contextCoords(f)
	ns, x := li.ctx.lookup(q, (*contextCost)(o))
	ns *= share
	if f.PrefillKVTokens > 0 {
		kv, xg := o.generationAttnNs(li, q[4], q[3])
		if kv > ns {
			return kv, xg
		}
	}
	return ns, x
}

// contextCoords is where a step's prefill chunks are looked up in a
// context-attention table (n requests of the mean chunk after the mean
// cached prefix), and the share of that full causal attention they compute.
func (o *Ops) contextCoords(f *Features) (q opCoords, share float64) {
	n := math.Max(1, f.PrefillRequests)
	c, k := f.PrefillTokens/n, f.PrefillKVTokens/n
	full := c + k
	work := f.PrefillAttn
	if work <= 0 {
		work = f.PrefillTokens * (k + c/2)
	}
	sh := &o.shape
	return opCoords{float64(sh.headDim), float64(sh.kvHeads), float64(sh.qHeads), full, n}, work / (n * full * full / 2)
}

// sol is causal attention's speed of light over batch requests of seq
// tokens: its FLOPs, or reading q, k and v and writing the output.
func (a *contextCost) sol(c opCoords) float64 {
	o := (*Ops)(a)
	hd, kvh, qh, seq, batch := c[0], c[1], c[2], c[3], c[4]
	s := &o.db.sys
	flops := 4 * batch * qh * hd * seq * seq / 2
	bytes := batch * seq * (2*qh + 2*kvh) * hd * o.shape.actBytes
	return math.Max(flops/s.BF16FLOPS, bytes/s.MemBandwidth)
}

// decodeKV is the KV length a decode batch's attention is priced at. The
// tables measure uniform batches; a ragged batch ends no sooner than its
// longest request. A decode kernel runs a program per (request, KV head),
// each streaming its request's KV through the bandwidth of the SM it runs
// on, so the longest request takes max/bw_SM and a uniform batch of P
// programs over S SMs takes (P/S)·L/bw_SM: the uniform length with the
// longest request's time is max·min(1, S/P). The batch is priced at that
// length or at its mean (the whole work spread over the GPU), whichever
// is longer; S is the engine's DecodeWave, else the database's SM count,
// and the mean alone prices the batch when neither gives one or the step
// does not record its longest context.
func (o *Ops) decodeKV(f *Features) float64 {
	mean := f.DecodeKVTokens/f.DecodeRequests + 1
	if !(f.DecodeMaxKVTokens > 0) {
		return mean
	}
	wave := o.db.sys.SMs
	if o.engine.DecodeWave > 0 {
		wave = o.engine.DecodeWave
	}
	return SplitKVLength(mean, f.DecodeMaxKVTokens+1, f.DecodeRequests, wave, float64(o.shape.kvHeads))
}

// SplitKVLength is the uniform context a decode batch of batch requests,
// of mean and longest context, costs the attention kernel of decodeKV (a
// program per (request, KV head), each streaming its request's KV, wave
// of them running at once: the SM count times the programs an SM runs
// together): max(mean, longest·min(1, wave/(batch·kvHeads))). A batch
// whose programs fit in one wave waits for its longest request; one of
// many waves spreads the work over the GPU. The mean when wave or kvHeads
// is not known.
func SplitKVLength(mean, longest, batch, wave, kvHeads float64) float64 {
	if !(wave > 0) || !(kvHeads > 0) || !(batch > 0) {
		return mean
	}
	return math.Max(mean, longest*math.Min(1, wave/(batch*kvHeads)))
}

// generationAttnNs is one layer's decode attention for batch requests
// attending to kv keys each.
func (o *Ops) generationAttnNs(li *launchIndex, batch, kv float64) (float64, bool) {
	sh := &o.shape
	q := opCoords{float64(sh.headDim), float64(sh.kvHeads), float64(sh.qHeads), kv, batch}
	return li.gen.lookup(q, (*generationCost)(o))
}

// sol is decode attention's speed of light: reading the KV cache, or its
// FLOPs.
func (a *generationCost) sol(c opCoords) float64 {
	o := (*Ops)(a)
	hd, kvh, qh, seq, batch := c[0], c[1], c[2], c[3], c[4]
	s := &o.db.sys
	return math.Max(4*batch*qh*hd*seq/s.BF16FLOPS, batch*seq*2*kvh*hd*o.shape.kvBytes/s.MemBandwidth)
}

// allReduceNs is one all-reduce of msg bytes over the TP group: the
// CUDA-graph rows of the comm table, or the ring's bytes over the
// interconnect when the database has none; a group spanning nodes adds
// the network leg to one node's all-reduce (WithNodes), always
// extrapolated.
func (o *Ops) allReduceNs(msg float64) (float64, bool) {
	tp := float64(o.shape.tp)
	if o.nodes.nodes > 1 {
		tp = float64(o.nodes.n)
	}
	q := opCoords{tp, msg}
	ns, x := 0.0, true
	if t := o.db.allreduce; t != nil {
		ns, x = t.lookup(q, ringCost{floor: o.db.arFloor})
	} else {
		ns = ringCost{}.sol(q) / o.db.sys.IntraNodeBandwidth * 1e9
	}
	if o.nodes.nodes > 1 {
		return ns + o.nodes.networkNs(msg, o.arEff), true
	}
	return ns, x
}

// ringCost is a ring all-reduce's cost. floor is the smallest message
// measured: below it the all-reduce is bound by its latency (the tables
// are flat over their smallest messages), so a smaller message costs what
// the smallest measured one does.
type ringCost struct{ floor float64 }

// sol is a ring all-reduce's bytes on the wire per GPU, 2(n−1)/n·msg.
func (r ringCost) sol(c opCoords) float64 { return 2 * (c[0] - 1) / c[0] * max(c[1], r.floor) }

// OpsParams are the params of an artifact of form FormOps: which database
// (a name package fpm/opdb ships, or a directory, relative to the
// artifact's), the model shape and the engine.
type OpsParams struct {
	Database string        `json:"database"`
	Shape    catalog.Shape `json:"shape"`
	Engine   OpsEngine     `json:"engine"`
}

// OpsArtifact wraps a prior into an artifact (training, metrics and
// provenance are left for the caller to fill).
func OpsArtifact(database string, s catalog.Shape, e OpsEngine) (*Artifact, error) {
	p, err := json.Marshal(OpsParams{Database: database, Shape: s, Engine: e})
	if err != nil {
		return nil, err
	}
	return &Artifact{ArtifactVersion: ArtifactVersion, Form: FormOps, Params: p}, nil
}
