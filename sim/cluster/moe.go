package cluster

import (
	"math"

	"github.com/steplab/steplab/model"
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
// combine) in every layer.
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
// Time. The busiest GPU's experts cost max(compute, weight streaming) at
// the roofline's GEMM and weight-bandwidth efficiencies: compute is
// 2·3·hidden·expert_intermediate FLOPs per assignment and layer; streaming
// reads each expert it touches once, and of its E/P experts it touches
// (E/P)·(1 − (1 − 1/E)^A) on average. The all-to-all moves, per layer and
// direction, tokens·top_k·hidden·dtype·(P−1)/P bytes from the rank with
// the most tokens over the expert link (at the roofline's collective
// efficiency): 2·layers·(latency + bytes/bandwidth).
type moePricer struct {
	MoE
	layers, hidden, dtype float64
	gpus                  int
	peak, bw              float64 // FLOP/s and bytes/s of one GPU
	gemmEff, weightEff    float64
	link                  Link
	linkEff               float64
	cmax                  float64
	scales                Scales
}

// newMoEPricer prices m on hardware hw with the model's full shape s,
// experts spread over gpus GPUs joined by link.
func newMoEPricer(m MoE, s model.Shape, hw model.Hardware, gpus int, link Link, sc Scales) *moePricer {
	r := model.NewRoofline(hw, s) // its efficiencies
	return &moePricer{MoE: m, layers: float64(s.Layers), hidden: float64(s.Hidden), dtype: float64(s.DTypeBytes),
		gpus: gpus, peak: hw.PeakFLOPs(), bw: hw.BandwidthBytes(), gemmEff: r.GEMMEff, weightEff: r.WeightBWEff,
		link: link, linkEff: r.AllReduceEff, cmax: expectedMaxNormal(gpus), scales: sc.or1()}
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
	assign := tokens * float64(m.TopK)
	params := m.ExpertParams(int(m.hidden))
	compute := 2 * params * m.maxLoad(assign) * m.layers / (m.peak * m.gemmEff)
	e := float64(m.Experts)
	touched := e / float64(m.gpus) * (1 - math.Pow(1-1/e, assign))
	stream := touched * params * m.dtype * m.layers / (m.bw * m.weightEff)
	return max(compute*m.scales.ExpertCompute, stream*m.scales.ExpertStream) * 1e9
}

// a2aNs is the all-to-all time when the rank with the most tokens has
// rankTokens.
func (m *moePricer) a2aNs(rankTokens float64) float64 {
	if m.gpus <= 1 || rankTokens <= 0 {
		return 0
	}
	p := float64(m.gpus)
	bytes := rankTokens * float64(m.TopK) * m.hidden * m.dtype * (p - 1) / p
	per := m.link.LatencyNs + bytes/(m.link.BytesPerSec*m.linkEff)*1e9
	return 2 * m.layers * per * m.scales.A2A
}

// stepTokens is the rows a step runs through the MLP: prefill tokens and
// decode requests (padded to the CUDA-graph size).
func stepTokens(f *model.Features) float64 {
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
