package model

import (
	"fmt"
	"math"
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
//
// all per GPU of the TP group (Shape's per-GPU quantities). T_decode is the
// CUDA-graph bucket (PaddedBatch) when it is larger than DecodeRequests:
// padded rows cost GEMM time and no attention. sampled (the LM-head rows)
// is one per request: vLLM computes logits only at each request's last
// scheduled position.
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
// Calibration, Llama-3.1-8B bf16 on an H200 with the defaults (targets in
// brackets, from the H200 vLLM 0.24 kernel tables of AIConfigurator in
// data/external/aiconfigurator-h200-vllm-0.24.0, per layer):
//
//   - decode B=1, 128-token context: 4.6 ms [4–7 ms: 15 GB of weights at
//     ~80% of 4.8 TB/s, plus launch gaps and the sampler].
//   - decode B=256 at 4,096 tokens each (1.05M KV tokens): 37 ms [30–45 ms].
//     The KV reads alone are 137 GB: FA3 decode attention measured
//     0.493 ms/layer at B=128×4,096 (2.15 GB/layer, 4.36 TB/s = 91% of
//     peak), 31.5 ms over 32 layers at B=256, so a 20–35 ms budget is not
//     reachable with a bf16 KV cache; an fp8 cache (KVDTypeBytes 1) gives
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
	HW    Hardware `json:"hardware"`
	Shape Shape    `json:"shape"`
	// GEMMEff is the fraction of PeakTFLOPS the projection and MLP GEMMs
	// reach when compute-bound.
	GEMMEff float64 `json:"gemm_eff"`
	// AttnEff is the fraction of PeakTFLOPS attention (flash attention)
	// reaches when compute-bound (prefill).
	AttnEff float64 `json:"attn_eff"`
	// WeightBWEff is the fraction of HBM bandwidth reached streaming the
	// weights (memory-bound GEMMs at small batch).
	WeightBWEff float64 `json:"weight_bw_eff"`
	// KVBWEff is the fraction of HBM bandwidth reached reading the KV
	// cache (paged decode attention).
	KVBWEff float64 `json:"kv_bw_eff"`
	// FixedNs is paid once per step: CUDA-graph launch, logits gather,
	// sampler.
	FixedNs float64 `json:"fixed_ns"`
	// PerLayerNs is paid per decoder layer: kernel gaps and the small
	// element-wise kernels (norms, RoPE, activation, residual) the roofline
	// does not count.
	PerLayerNs float64 `json:"per_layer_ns"`
	// AllReduceLatencyNs per all-reduce (two per layer) when TP > 1.
	AllReduceLatencyNs float64 `json:"allreduce_latency_ns"`
	// AllReduceEff is the fraction of HW.InterconnectGBs an all-reduce's
	// payload moves at.
	AllReduceEff float64 `json:"allreduce_eff"`
}

// NewRoofline returns the prior for a shape on a hardware with the default
// efficiencies (see Roofline).
func NewRoofline(hw Hardware, s Shape) Roofline {
	return Roofline{
		HW: hw, Shape: s,
		GEMMEff:            0.80,
		AttnEff:            0.52,
		WeightBWEff:        0.80,
		KVBWEff:            0.90,
		FixedNs:            200_000,
		PerLayerNs:         15_000,
		AllReduceLatencyNs: 5_000,
		AllReduceEff:       0.70,
	}
}

// Validate checks the hardware, the shape and that every efficiency is in
// (0, 1] and every overhead finite and non-negative.
func (r Roofline) Validate() error {
	if err := r.HW.Validate(); err != nil {
		return err
	}
	if err := r.Shape.Validate(); err != nil {
		return err
	}
	for name, e := range map[string]float64{"gemm_eff": r.GEMMEff, "attn_eff": r.AttnEff,
		"weight_bw_eff": r.WeightBWEff, "kv_bw_eff": r.KVBWEff, "allreduce_eff": r.AllReduceEff} {
		if !(e > 0 && e <= 1) {
			return fmt.Errorf("model: roofline %s = %v: must be in (0, 1]", name, e)
		}
	}
	for name, v := range map[string]float64{"fixed_ns": r.FixedNs, "per_layer_ns": r.PerLayerNs,
		"allreduce_latency_ns": r.AllReduceLatencyNs} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("model: roofline %s = %v: must be finite and >= 0", name, v)
		}
	}
	if r.Shape.tp() > 1 && !(r.HW.InterconnectGBs > 0) {
		return fmt.Errorf("model: roofline: TP=%d needs hardware %s to have an interconnect bandwidth", r.Shape.tp(), r.HW.Name)
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
}

// rooflineConsts are the shape- and hardware-derived constants of a
// prediction, computed once by Prepare rather than for every step.
type rooflineConsts struct {
	peak, bw, kvTok, pair         float64
	fixed, weightStream           float64
	gemmParams, lmHeadParams      float64
	tp                            int
	allReduceMsgPerToken, linkBps float64
}

func (r Roofline) consts() rooflineConsts {
	s := r.Shape
	c := rooflineConsts{
		peak: r.HW.PeakFLOPs(), bw: r.HW.BandwidthBytes(), kvTok: float64(s.KVBytesPerToken()),
		pair: s.AttnFLOPsPerPair(), fixed: r.FixedNs + float64(s.Layers)*r.PerLayerNs,
		gemmParams: s.GEMMParamsPerGPU(), lmHeadParams: s.LMHeadParamsPerGPU(), tp: s.tp(),
		allReduceMsgPerToken: float64(s.Hidden) * float64(s.DTypeBytes),
		linkBps:              r.HW.InterconnectGBs * 1e9 * r.AllReduceEff,
	}
	c.weightStream = float64(s.StreamedWeightBytes()) / (c.bw * r.WeightBWEff) * 1e9
	return c
}

// Breakdown prices a step by part.
func (r Roofline) Breakdown(f Features) RooflineBreakdown {
	c := r.consts()
	return r.breakdown(&c, &f)
}

// breakdown takes pointers: a simulator calls it once a step, and copying
// the model, its constants and the features each time showed in profiles.
func (r *Roofline) breakdown(c *rooflineConsts, f *Features) RooflineBreakdown {
	decodeRows := math.Max(f.DecodeRequests, f.PaddedBatch)
	tokens := f.PrefillTokens + decodeRows
	sampled := f.PrefillRequests + decodeRows
	if f.PrefillTokens > 0 && f.PrefillRequests < 1 {
		sampled++ // a prefill chunk always has at least one request
	}

	var b RooflineBreakdown
	b.FixedNs = c.fixed
	b.WeightStreamNs = c.weightStream
	gemmFLOPs := 2 * (c.gemmParams*tokens + c.lmHeadParams*sampled)
	b.GEMMComputeNs = gemmFLOPs / (c.peak * r.GEMMEff) * 1e9
	b.GEMMNs, b.GEMMBound = b.WeightStreamNs, "memory"
	if b.GEMMComputeNs > b.WeightStreamNs {
		b.GEMMNs, b.GEMMBound = b.GEMMComputeNs, "compute"
	}

	b.PrefillAttnNs = math.Max(c.pair*f.PrefillAttn/(c.peak*r.AttnEff), f.PrefillKVTokens*c.kvTok/(c.bw*r.KVBWEff)) * 1e9
	b.DecodeAttnNs = math.Max(f.DecodeKVTokens*c.kvTok/(c.bw*r.KVBWEff), c.pair*f.DecodeKVTokens/(c.peak*r.AttnEff)) * 1e9

	if c.tp > 1 && tokens > 0 {
		msg := tokens * c.allReduceMsgPerToken
		per := r.AllReduceLatencyNs + 2*float64(c.tp-1)/float64(c.tp)*msg/c.linkBps*1e9
		b.AllReduceNs = 2 * float64(r.Shape.Layers) * per
	}
	b.TotalNs = b.FixedNs + b.GEMMNs + b.PrefillAttnNs + b.DecodeAttnNs + b.AllReduceNs
	return b
}

// PreparedRoofline is a Roofline with its constants computed once: the
// form a simulator prices millions of steps with. Build it with Prepare;
// it predicts exactly what the Roofline does.
type PreparedRoofline struct {
	Roofline
	c rooflineConsts
}

// Prepare computes the roofline's constants once.
func (r Roofline) Prepare() *PreparedRoofline { return &PreparedRoofline{Roofline: r, c: r.consts()} }

// PredictNs implements FPM.
func (p *PreparedRoofline) PredictNs(f Features) float64 { return p.breakdown(&p.c, &f).TotalNs }

// Breakdown prices a step by part.
func (p *PreparedRoofline) Breakdown(f Features) RooflineBreakdown { return p.breakdown(&p.c, &f) }

// PredictNs implements FPM: the step's device time in ns. Admission
// features (NewRequests, NewReqTokens) are host work (HostModel), not
// device time, and do not change it.
func (r Roofline) PredictNs(f Features) float64 { return r.Breakdown(f).TotalNs }
