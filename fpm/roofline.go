package fpm

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/steplab/steplab/catalog"
)

// Roofline is the prior forward-pass model (docs/architecture.md#forward-pass-model): a step's device
// time from the hardware's peaks and the model's shape alone, for when no
// data exists. Like BLIS's roofline mode it prices each phase as the max
// of its compute time and its memory time, with efficiency factors for how
// much of a peak real kernels reach, and adds fixed overheads:
//
//	t = Fixed + Layers·PerLayer
//	  + max(weights / (BW·WeightBWEff),                                     GEMMs: weight streaming
//	        2·(P_layers·(T_prefill + T_decode) + P_lmhead·sampled) / (Peak·GEMMEff))   vs compute
//	  + max(AttnFLOPs(PrefillAttn) / (Peak·AttnEff), PrefillKVTokens·KV/tok / (BW·KVBWEff))
//	  + max(DecodeKVTokens·KV/tok / (BW·KVBWEff), AttnFLOPs(DecodeKVTokens) / (Peak·AttnEff))
//	  + all-reduces (TP > 1): 2·Layers × (latency + 2(TP−1)/TP · tokens·Hidden·dtype / (link·AllReduceEff))
//	    on one node; a TP group spanning nodes adds the network leg (collective)
//
// all per GPU of the TP group (Shape's per-GPU quantities). T_decode is the
// CUDA-graph bucket (PaddedBatch) when it is larger than DecodeRequests:
// padded rows cost GEMM time and no attention. sampled (the LM-head rows)
// is one per request: vLLM computes logits only at each request's last
// scheduled position. Peak is the device's dense peak for the GEMMs' dtype
// (fp8 for fp8 weights on a chip with fp8 tensor cores, else the
// activation dtype) and for attention the activation dtype's; the
// efficiencies are the hardware's RooflineParams curves, evaluated per
// step.
//
// Beyond dense GQA models: an MoE streams, per MoE layer, the experts its
// tokens route to (ExpectedExperts of them under uniform routing) and
// multiplies top-k of them per token; MLA reads its latent KV and pays
// attention FLOPs over the latent width when decoding; sliding-window
// layers read at most SlidingWindow keys per request.
//
// Mixed steps: the weights are streamed once for the whole step, so a mixed
// step costs its prefill alone plus the marginal cost of its decode work —
// the decode tokens' GEMM compute beyond what the prefill pass already
// pays (zero while the pass stays memory-bound), its KV reads and its share
// of the all-reduces — never prefill + decode with two weight streams.
// Because max(W, ·) is convex, that marginal is at least AIC's
// decode(d) − decode(empty) composition, and larger when the combined
// pass is compute-bound (decode tokens riding on a long prefill chunk pay
// their GEMM FLOPs, which a memory-bound decode step alone hides).
//
// Calibration, Llama-3.1-8B bf16 on an H200 with the H200's spec (targets
// in brackets, from AIConfigurator's H200 vLLM 0.24 kernel tables, per
// layer); GenericRoofline carries these values to other devices:
//
//   - decode B=1, 128-token context: 4.6 ms [4–7 ms: 15 GB of weights at
//     ~80% of 4.8 TB/s, plus launch gaps and the sampler].
//   - decode B=256 at 4,096 tokens each (1.05M KV tokens): 37 ms [30–45 ms].
//     The KV reads alone are 137 GB: FA3 decode attention measured
//     0.493 ms/layer at B=128×4,096 (2.15 GB/layer, 4.36 TB/s = 91% of
//     peak), 31.5 ms over 32 layers at B=256, so a 20–35 ms budget is not
//     reachable with a bf16 KV cache; an fp8 cache (KVDType fp8) gives
//     ~21 ms.
//   - decode KV cost: KVBytesPerToken/(BW·KVBWEff) = 30 ns per KV token, i.e.
//     0.95 ns per token per layer — the measured 0.94 ns (B=128×4,096) and
//     the ~1 ns/token order of the source documents' fits (1.2 ns/token on
//     H100 with an fp8 KV cache) are per-layer-sized numbers.
//   - prefill of one 8,192-token prompt: 180 ms [150–220 ms]: 1.1e14 GEMM
//     FLOPs at 80% of 989 TFLOPS (measured m=8192 GEMMs: 0.507 ms for
//     n=6144,k=4096 = 82%, 0.382 ms for n=k=4096 = 73%) plus 1.8e13
//     causal attention FLOPs at 52% (FA3 context attention measured
//     0.268 ms/layer at 4,096 tokens = 513 TFLOPS).
//   - all-reduce: ~4.5 µs per small all-reduce under CUDA graphs (vLLM
//     custom all-reduce, 2–8 GPUs), ~73% of 450 GB/s NVLink per direction
//     for large messages.
//
// The prior has no notion of kernel choice, GEMM tile quantisation or
// host stalls; it is a prior, and a fitted Linear or Grid replaces it once
// steps are captured.
type Roofline struct {
	HW    catalog.Hardware `json:"hardware"`
	Shape catalog.Shape    `json:"shape"`
	// RooflineParams are the hardware's achievable fractions and
	// overheads (HW.Roofline when built by NewRoofline).
	catalog.RooflineParams
	// AllReduceLatencyNs per all-reduce (two per layer) when TP > 1: the
	// latency of the link that joins the TP group's GPUs within a node.
	AllReduceLatencyNs float64 `json:"allreduce_latency_ns"`
}

// NewRoofline returns the prior for a shape on a hardware, with the
// hardware's roofline parameters and the latency of the link its TP group
// all-reduces over within a node.
func NewRoofline(hw catalog.Hardware, s catalog.Shape) Roofline {
	l, _ := hw.Layout(s.TPDegree())
	return Roofline{HW: hw, Shape: s, RooflineParams: hw.Roofline, AllReduceLatencyNs: l.Link.LatencyUs * 1000}
}

// Validate checks the hardware, the shape, the parameters and that a
// tensor-parallel shape has a link to all-reduce over.
func (r Roofline) Validate() error {
	if err := r.HW.Validate(); err != nil {
		return err
	}
	if err := r.Shape.Validate(); err != nil {
		return err
	}
	if err := r.RooflineParams.Validate(); err != nil {
		return fmt.Errorf("fpm: roofline: %w", err)
	}
	if v := r.AllReduceLatencyNs; math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return fmt.Errorf("fpm: roofline allreduce_latency_ns = %v: must be finite and >= 0", v)
	}
	if tp := r.Shape.TPDegree(); tp > 1 {
		if _, err := r.HW.Layout(tp); err != nil {
			return fmt.Errorf("fpm: roofline: TP=%d: %w", tp, err)
		}
	}
	return nil
}

// RooflineBreakdown is a prediction by part, in ns. TotalNs is their sum
// (WeightStreamNs and GEMMComputeNs are the two sides of GEMMNs, not
// additional terms).
type RooflineBreakdown struct {
	FixedNs        float64 `json:"fixed_ns"` // FixedNs + Layers·PerLayerNs
	GEMMNs         float64 `json:"gemm_ns"`  // max(WeightStreamNs, GEMMComputeNs)
	WeightStreamNs float64 `json:"weight_stream_ns"`
	GEMMComputeNs  float64 `json:"gemm_compute_ns"`
	PrefillAttnNs  float64 `json:"prefill_attn_ns"`
	DecodeAttnNs   float64 `json:"decode_attn_ns"`
	AllReduceNs    float64 `json:"allreduce_ns"`
	TotalNs        float64 `json:"total_ns"`
	// GEMMBound is "memory" or "compute": which side of the roofline the
	// step's GEMMs are on.
	GEMMBound string `json:"gemm_bound"`
	// ExpertsPerLayer is the expected distinct experts the step reads per
	// MoE layer (0 for a dense model).
	ExpertsPerLayer float64 `json:"experts_per_layer,omitempty"`
}

// rooflineConsts are the shape- and hardware-derived constants of a
// prediction, computed once by Prepare rather than for every step.
type rooflineConsts struct {
	gemmPeak, attnPeak, bw float64
	// kvTok is the KV bytes per token read over the whole context (the
	// full-attention layers); pair and decPair their attention FLOPs per
	// (query, key) pair (prefill and decode forms). wins are the layers
	// reading at most a window of keys per request (sliding, chunked,
	// sparse top-k), by window.
	kvTok, pair, decPair float64
	wins                 []catalog.KVGroup
	// state is the constant state per request (linear attention,
	// Mamba-2) a step reads and writes back.
	state                    float64
	fixed, weightStream      float64
	gemmParams, lmHeadParams float64
	// MoE: the weights streamed besides the routed experts, one expert's
	// bytes, and the MoE layers.
	moe                                    bool
	nonExpertBytes, expertBytes, moeLayers float64
	tp                                     int
	allReduceMsgPerToken                   float64
	ar                                     collective
	// scale multiplies the terms calibrate fits (rooflineTerms' order),
	// 1 for the prior itself.
	scale [nRooflineTerms]float64
}

// The roofline's scalable terms (Scalable), in order.
var rooflineTerms = []string{PriorTermGEMM, PriorTermPrefillAttn, PriorTermDecodeAttn, PriorTermOverhead}

const (
	rtGEMM = iota
	rtPrefillAttn
	rtDecodeAttn
	rtOverhead
	nRooflineTerms
)

func (r Roofline) consts() rooflineConsts {
	s := r.Shape
	layout, err := r.HW.Layout(s.TPDegree())
	if err != nil {
		// Validate refuses it; unvalidated, the group is priced as one node.
		layout.GPUs, layout.Nodes, layout.GPUsPerNode = s.TPDegree(), 1, s.TPDegree()
		layout.Link, _ = r.HW.TPLink()
	}
	c := rooflineConsts{
		attnPeak: r.HW.PeakTFLOPSFor(s.DType) * 1e12,
		bw:       r.HW.BandwidthBytes(), kvTok: float64(s.KVBytesPerToken()),
		pair: s.AttnFLOPsPerPair(), fixed: r.FixedNs + float64(s.Layers)*r.PerLayerNs,
		gemmParams: s.GEMMParamsPerGPU(), lmHeadParams: s.LMHeadParamsPerGPU(), tp: s.TPDegree(),
		allReduceMsgPerToken: float64(s.Hidden) * catalog.DTypeBytes(s.DType),
		ar:                   newCollective(layout),
		scale:                [nRooflineTerms]float64{1, 1, 1, 1},
	}
	c.decPair = c.pair
	if s.IsMLA() {
		c.decPair = float64(s.Layers) * s.AttnPairFLOPsPerLayer(true)
	}
	switch {
	case len(s.Stack) > 0:
		groups, state := s.KVGroups()
		c.kvTok, c.pair, c.decPair = groups[0].KV, groups[0].Pair, groups[0].DecPair
		c.wins, c.state = groups[1:], state
	case s.SlidingLayers > 0:
		full, win := float64(s.FullLayers()), float64(s.SlidingLayers)
		c.kvTok = full * float64(s.KVLayerBytes())
		c.pair = full * s.AttnPairFLOPsPerLayer(false)
		c.decPair = full * s.AttnPairFLOPsPerLayer(true)
		c.wins = []catalog.KVGroup{{Window: float64(s.SlidingWindow), KV: win * float64(s.KVLayerBytes()),
			Pair: win * s.AttnPairFLOPsPerLayer(false), DecPair: win * s.AttnPairFLOPsPerLayer(true)}}
	}
	c.gemmPeak = r.gemmPeak(c.gemmParams)
	if s.IsMoE() {
		m := s.MoE
		c.moe = true
		c.expertBytes = s.ExpertBytesPerGPU()
		c.moeLayers = float64(s.MoELayers())
		c.nonExpertBytes = float64(s.StreamedWeightBytes()) - c.moeLayers*float64(m.Experts)*c.expertBytes
	}
	streamed := float64(s.StreamedWeightBytes())
	c.weightStream = streamed / (c.bw * r.WeightBWEff.At(streamed)) * 1e9
	return c
}

// gemmPeak is the GEMMs' peak in FLOP/s: the GEMM dtype's, or where the
// token mixers, the other linear layers and the routed experts run at
// different dtypes, the peak that prices their per-token FLOPs (params
// of each part over its peak, summed) in one division.
func (r Roofline) gemmPeak(params float64) float64 {
	s := r.Shape
	peak := func(w string) float64 { return r.HW.PeakTFLOPSFor(s.GEMMDTypeOf(r.HW, w)) * 1e12 }
	base := peak(s.LinearDType())
	pa, pe := peak(s.MixerDType()), peak(s.ExpertDType())
	if pa == base && (pe == base || !s.IsMoE()) {
		return base
	}
	linear, experts, _ := s.ParamSums(true, true)
	attn := s.AttnParams(true)
	return params / (attn/pa + (linear-attn)/base + experts/pe)
}

// Breakdown prices a step by part.
func (r Roofline) Breakdown(f Features) RooflineBreakdown {
	c := r.consts()
	return r.breakdown(&c, &f)
}

// breakdown takes pointers: a simulator calls it once a step, and copying
// the model, its constants and the features each time showed in profiles.
// The builtin min and max treat NaN and signed zeros as math.Min and
// math.Max do, without their call (assembly on amd64, never inlined).
func (r *Roofline) breakdown(c *rooflineConsts, f *Features) RooflineBreakdown {
	decodeRows := max(f.DecodeRequests, f.PaddedBatch)
	tokens := f.PrefillTokens + decodeRows
	sampled := f.PrefillRequests + decodeRows
	if f.PrefillTokens > 0 && f.PrefillRequests < 1 {
		sampled++ // a prefill chunk always has at least one request
	}

	var b RooflineBreakdown
	b.FixedNs = c.fixed * c.scale[rtOverhead]
	b.WeightStreamNs = c.weightStream
	if c.moe {
		m := r.Shape.MoE
		b.ExpertsPerLayer = catalog.ExpectedExperts(m.Experts, m.TopK, tokens)
		bytes := c.nonExpertBytes + c.moeLayers*b.ExpertsPerLayer*c.expertBytes
		b.WeightStreamNs = bytes / (c.bw * r.WeightBWEff.At(bytes)) * 1e9
	}
	b.WeightStreamNs *= c.scale[rtGEMM]
	gemmFLOPs := 2 * (c.gemmParams*tokens + c.lmHeadParams*sampled)
	b.GEMMComputeNs = gemmFLOPs / (c.gemmPeak * r.GEMMEff.At(tokens)) * 1e9 * c.scale[rtGEMM]
	b.GEMMNs, b.GEMMBound = b.WeightStreamNs, "memory"
	if b.GEMMComputeNs > b.WeightStreamNs {
		b.GEMMNs, b.GEMMBound = b.GEMMComputeNs, "compute"
	}

	// Sliding-window layers see at most window keys per query and hold at
	// most window tokens per request.
	attn, kv := c.pair*f.PrefillAttn, f.PrefillKVTokens*c.kvTok
	for _, w := range c.wins {
		attn += w.Pair * min(f.PrefillAttn, f.PrefillTokens*w.Window)
		kv += w.KV * min(f.PrefillKVTokens, max(f.PrefillRequests, 1)*w.Window)
	}
	if c.state > 0 && f.PrefillTokens > 0 {
		kv += 2 * c.state * max(f.PrefillRequests, 1)
	}
	b.PrefillAttnNs = max(attn/(c.attnPeak*r.AttnEff.At(f.PrefillTokens)), kv/(c.bw*r.KVBWEff.At(kv))) * 1e9 * c.scale[rtPrefillAttn]
	attn, kv = c.decPair*f.DecodeKVTokens, f.DecodeKVTokens*c.kvTok
	for _, w := range c.wins {
		held := min(f.DecodeKVTokens, f.DecodeRequests*w.Window)
		attn += w.DecPair * held
		kv += w.KV * held
	}
	kv += 2 * c.state * f.DecodeRequests
	b.DecodeAttnNs = max(kv/(c.bw*r.KVBWEff.At(kv)), attn/(c.attnPeak*r.AttnEff.At(f.DecodeRequests))) * 1e9 * c.scale[rtDecodeAttn]

	if c.tp > 1 && tokens > 0 {
		msg := tokens * c.allReduceMsgPerToken
		b.AllReduceNs = 2 * float64(r.Shape.Layers) * c.ar.allReduceNs(r.AllReduceLatencyNs, msg, r.AllReduceEff)
	}
	b.TotalNs = b.FixedNs + b.GEMMNs + b.PrefillAttnNs + b.DecodeAttnNs + b.AllReduceNs
	return b
}

// PreparedRoofline is a Roofline with its constants computed once: the
// form a simulator prices millions of steps with. Build it with Prepare;
// it predicts exactly what the Roofline does until Scaled moves its terms.
type PreparedRoofline struct {
	Roofline
	// Residuals, when set (a calibrated roofline), give its predictions
	// an interval.
	Residuals *ResidualQuantiles
	c         rooflineConsts
}

// Prepare computes the roofline's constants once.
func (r Roofline) Prepare() *PreparedRoofline { return &PreparedRoofline{Roofline: r, c: r.consts()} }

// PredictNs implements FPM.
func (p *PreparedRoofline) PredictNs(f Features) float64 { return p.breakdown(&p.c, &f).TotalNs }

// Breakdown prices a step by part.
func (p *PreparedRoofline) Breakdown(f Features) RooflineBreakdown { return p.breakdown(&p.c, &f) }

// PredictIntervalNs implements IntervalFPM: the residual quantiles'
// spread around the prediction (none without residuals).
func (p *PreparedRoofline) PredictIntervalNs(f Features, coverage float64) (mid, lo, hi float64) {
	mid = p.PredictNs(f)
	lo, hi = p.Residuals.Interval(mid, coverage)
	return mid, lo, hi
}

// HasUncertainty reports whether the roofline carries residuals.
func (p *PreparedRoofline) HasUncertainty() bool { return p.Residuals != nil && len(p.Residuals.P) > 0 }

func (p *PreparedRoofline) calibrated() bool { return p.c.scale != [nRooflineTerms]float64{1, 1, 1, 1} }

// ScaleTerms implements Scalable: gemm, prefill_attn, decode_attn and
// overhead (the fixed per-step and per-layer costs).
func (p *PreparedRoofline) ScaleTerms() []string { return append([]string(nil), rooflineTerms...) }

// ScaleValues implements Scalable: the multipliers on the terms.
func (p *PreparedRoofline) ScaleValues() []float64 { return append([]float64(nil), p.c.scale[:]...) }

// Scaled implements Scalable.
func (p *PreparedRoofline) Scaled(mult []float64) (Scalable, error) {
	if err := checkMult(rooflineTerms, mult); err != nil {
		return nil, err
	}
	c := *p
	for i := range c.c.scale {
		c.c.scale[i] *= mult[i]
	}
	return &c, nil
}

// WithResiduals implements Scalable.
func (p *PreparedRoofline) WithResiduals(q *ResidualQuantiles) Scalable {
	c := *p
	c.Residuals = q
	return &c
}

// Artifact implements Scalable: form roofline, its hardware, shape and
// parameters with the multipliers on its terms.
func (p *PreparedRoofline) Artifact() (*Artifact, error) {
	s := p.c.scale
	r := p.Roofline
	b, err := json.Marshal(rooflineArtifactParams{Roofline: &r,
		Scales: &TermScales{GEMM: s[rtGEMM], PrefillAttn: s[rtPrefillAttn], DecodeAttn: s[rtDecodeAttn], Overhead: s[rtOverhead]}})
	if err != nil {
		return nil, err
	}
	return &Artifact{ArtifactVersion: ArtifactVersion, Form: FormRoofline, Params: b, Residuals: p.Residuals}, nil
}

// PredictNs implements FPM: the step's device time in ns. Admission
// features (NewRequests, NewReqTokens) are host work (HostModel), not
// device time, and do not change it.
func (r Roofline) PredictNs(f Features) float64 { return r.Breakdown(f).TotalNs }
