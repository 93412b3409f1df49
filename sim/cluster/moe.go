package cluster

import (
	"math"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/fpm"
)

// Scales are calibrated multipliers on the expert-parallel step's parts:
// the experts' compute and weight streaming (the two sides of their
// roofline) and the all-to-all (steplab calibrate fits them as
// moe.expert_compute, moe.expert_stream and moe.a2a; 0 reads as 1).
type Scales struct {
	ExpertCompute float64 `json:"expert_compute"`
	ExpertStream  float64 `json:"expert_stream"`
	A2A           float64 `json:"a2a"`
}

func (s Scales) or1() Scales {
	for _, v := range []*float64{&s.ExpertCompute, &s.ExpertStream, &s.A2A} {
		if *v == 0 {
			*v = 1
		}
	}
	return s
}

// moePricer prices the routed experts of one step of an expert-parallel
// instance: the tokens of all its ranks are routed to experts spread over
// gpus GPUs, each GPU runs the tokens routed to its experts, and the
// hidden states go to those GPUs and back (all-to-all dispatch and
// combine) in every MoE layer.
//
// Load. A step's N tokens make A = N·top_k (token, expert) assignments.
// With routing uniform over the experts, a GPU's load is Binomial(A, 1/P)
// over P GPUs; the step waits for the busiest, whose expected load is
//
//	E[max] ≈ A/P + c_P·sqrt(A·(1/P)·(1−1/P)),  capped at A,
//
// c_P the expected maximum of P independent standard normals (0, 0.564,
// 0.846, 1.029, 1.163 ... for P = 1, 2, 3, 4, 5; 1.424 for 8). The k
// experts of one token are distinct, which this ignores (it slightly
// overstates the spread).
//
// Time. The busiest GPU's experts cost max(compute, weight streaming),
// each at the hardware's roofline efficiency curve read at the step's own
// x: compute is 2·3·hidden·expert_intermediate FLOPs per assignment and
// MoE layer at the peak of the experts' dtype (bf16 where the chip has no
// unit for it), at the GEMM efficiency of the busiest GPU's rows;
// streaming reads each expert it touches once, catalog.ExpectedExperts/P of
// them per layer, at the weight-bandwidth efficiency of those bytes. The
// all-to-all moves, per MoE layer and direction, tokens·top_k·hidden·
// activation bytes·(P−1)/P from the rank with the most tokens over the
// expert link, at the collective efficiency of those bytes:
// 2·moe layers·(latency + bytes/bandwidth). An instance spanning nodes of
// D GPUs (acrossNodes) sends (D−1)/P of those bytes over the link within
// its node and (P−D)/P over its GPU's network link at once, and waits
// for the slower: max(latency + intra/link, hop + inter/network).
type moePricer struct {
	experts, topK   int
	layers, hidden  float64 // MoE layers
	paramsPerExpert float64 // one expert's parameters in one layer
	bytesPerExpert  float64
	actBytes        float64
	gpus            int
	peak, bw        float64 // FLOP/s and bytes/s of one GPU
	roofline        catalog.RooflineParams
	link            Link
	// net and perNode, for an instance spanning nodes: the network link
	// and the GPUs of one node (0: one node).
	net     Link
	perNode int
	cmax    float64
	scales  Scales
}

// newMoEPricer prices the routed experts of s (a mixture of experts) on
// hardware hw, spread over gpus GPUs joined by link.
func newMoEPricer(s catalog.Shape, hw catalog.Hardware, gpus int, link Link, sc Scales) *moePricer {
	peak := hw.PeakTFLOPSFor(s.ExpertDType())
	if peak <= 0 {
		peak = hw.PeakTFLOPSFor(catalog.DTypeBF16)
	}
	m := s.MoE
	return &moePricer{experts: m.Experts, topK: m.TopK, layers: float64(s.MoELayers()), hidden: float64(s.Hidden),
		paramsPerExpert: 3 * float64(s.Hidden) * float64(m.ExpertIntermediate), bytesPerExpert: s.ExpertBytes(),
		actBytes: catalog.DTypeBytes(s.DType), gpus: gpus, peak: peak * 1e12, bw: hw.BandwidthBytes(), roofline: hw.Roofline,
		link: link, cmax: expectedMaxNormal(gpus), scales: sc.or1()}
}

// acrossNodes prices the all-to-all of an instance laid out over nodes.
func (m *moePricer) acrossNodes(l catalog.Layout) {
	m.perNode = l.GPUsPerNode
	m.net = Link{BytesPerSec: l.Network.GBsPerDirection * 1e9, LatencyNs: l.Network.LatencyUs * 1e3}
}

// maxLoad is the expected assignments on the busiest GPU.
func (m *moePricer) maxLoad(assign float64) float64 {
	p := float64(m.gpus)
	return min(assign, assign/p+m.cmax*math.Sqrt(assign*(1/p)*(1-1/p)))
}

// expertNs is the expert time of a step of tokens tokens (all ranks).
func (m *moePricer) expertNs(tokens float64) float64 {
	if tokens <= 0 {
		return 0
	}
	load := m.maxLoad(tokens * float64(m.topK))
	compute := 2 * m.paramsPerExpert * load * m.layers / (m.peak * m.roofline.GEMMEff.At(load))
	bytes := catalog.ExpectedExperts(m.experts, m.topK, tokens) / float64(m.gpus) * m.bytesPerExpert * m.layers
	stream := bytes / (m.bw * m.roofline.WeightBWEff.At(bytes))
	return max(compute*m.scales.ExpertCompute, stream*m.scales.ExpertStream) * 1e9
}

// a2aNs is the all-to-all time when the rank with the most tokens has
// rankTokens.
func (m *moePricer) a2aNs(rankTokens float64) float64 {
	if m.gpus <= 1 || rankTokens <= 0 {
		return 0
	}
	p := float64(m.gpus)
	if m.perNode > 0 {
		sent, d := rankTokens*float64(m.topK)*m.hidden*m.actBytes, float64(m.perNode)
		intra, inter := sent*(d-1)/p, sent*(p-d)/p
		per := max(m.transferNs(m.link, intra), m.transferNs(m.net, inter))
		return 2 * m.layers * per * m.scales.A2A
	}
	bytes := rankTokens * float64(m.topK) * m.hidden * m.actBytes * (p - 1) / p
	per := m.transferNs(m.link, bytes)
	return 2 * m.layers * per * m.scales.A2A
}

// transferNs is bytes over l at the collective efficiency of those bytes.
func (m *moePricer) transferNs(l Link, bytes float64) float64 {
	return l.LatencyNs + bytes/(l.BytesPerSec*m.roofline.AllReduceEff.At(bytes))*1e9
}

// stepTokens is the rows a step runs through the MLP: prefill tokens and
// decode requests (padded to the CUDA-graph size).
func stepTokens(f *fpm.Features) float64 {
	return f.PrefillTokens + max(f.DecodeRequests, f.PaddedBatch)
}

// expectedMaxNormal is E[max of n iid standard normals], ∫ x·n·φ(x)·Φ(x)^(n−1) dx,
// by the trapezoid rule on [−10, 10].
func expectedMaxNormal(n int) float64 {
	if n <= 1 {
		return 0
	}
	const lo, hi, steps = -10.0, 10.0, 20000
	h := (hi - lo) / steps
	var sum float64
	for i := 0; i <= steps; i++ {
		x := lo + float64(i)*h
		phi := math.Exp(-x*x/2) / math.Sqrt(2*math.Pi)
		cdf := 0.5 * math.Erfc(-x/math.Sqrt2)
		v := x * float64(n) * phi * math.Pow(cdf, float64(n-1))
		if i == 0 || i == steps {
			v /= 2
		}
		sum += v
	}
	return sum * h
}
