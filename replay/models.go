package replay

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/opdb"
	"github.com/steplab/steplab/model"
)

// RTXPro6000 is the NVIDIA RTX PRO 6000 Blackwell (GB202, 188 SMs):
// 96 GB GDDR7 on a 512-bit bus at 28 Gbps = 1,792 GB/s (NVIDIA's
// announcement; LLMServingSim's bench config uses a measured 1,597 GB/s);
// ~500 TFLOPS dense bf16 tensor (4,000 TOPS FP4 with sparsity halved three
// times); no NVLink: PCIe Gen5 x16, ~64 GB/s per direction. model has no
// preset for it, so replay resolves it here.
var RTXPro6000 = model.Hardware{Name: "RTX-PRO-6000", PeakTFLOPS: 500, MemBandwidthGBs: 1792, MemGB: 96, InterconnectGBs: 64}

// extraShapes are shapes replay resolves beyond model's presets.
var extraShapes = map[string]struct {
	s     model.Shape
	proxy string
}{
	// Qwen3-30B-A3B is a mixture of experts (48 layers, 128 experts of
	// intermediate 768, 8 active per token). model.Shape is dense, so this
	// is an active-parameter proxy (intermediate 8×768): its weight
	// streaming is under-counted at large batch, where most experts are
	// read; calibrate rather than trust its prior.
	"qwen3-30b-a3b": {model.Shape{Name: "Qwen3-30B-A3B(active-proxy)", Layers: 48, Hidden: 2048, Heads: 32, KVHeads: 4, HeadDim: 128,
		Intermediate: 6144, Vocab: 151936, DTypeBytes: 2, TP: 1}, "MoE approximated by a dense active-parameter proxy"},
}

// HardwareOf resolves the manifest's GPU to a hardware description.
func HardwareOf(m *datasets.Manifest) (model.Hardware, error) {
	if m == nil || m.Hardware == nil || m.Hardware.GPUName == "" {
		return model.Hardware{}, fmt.Errorf("manifest names no GPU")
	}
	name := m.Hardware.GPUName
	if h, err := model.HardwareByName(name); err == nil {
		return h, nil
	}
	k := strings.NewReplacer(" ", "", "-", "", "_", "").Replace(strings.ToLower(name))
	if strings.Contains(k, "rtxpro6000") {
		return RTXPro6000, nil
	}
	_, err := model.HardwareByName(name)
	return model.Hardware{}, fmt.Errorf("%w (replay also knows RTX PRO 6000)", err)
}

func jsonMarshal(v any) (json.RawMessage, error) { return json.Marshal(v) }

// ShapeOf resolves the manifest's model to a shape: its recorded layer
// shape, a preset by name (with or without the "org/" prefix), or one of
// replay's extra shapes. note is non-empty when the shape is approximate.
func ShapeOf(m *datasets.Manifest) (s model.Shape, note string, err error) {
	if m == nil || m.Model == nil {
		return s, "", fmt.Errorf("manifest has no model section")
	}
	mm := m.Model
	tp := max(1, mm.TensorParallel)
	if mm.Layers > 0 && mm.Hidden > 0 {
		s = model.Shape{Name: mm.Name, Layers: mm.Layers, Hidden: mm.Hidden, Heads: mm.Heads, KVHeads: mm.KVHeads, HeadDim: mm.HeadDim,
			Intermediate: mm.Intermediate, Vocab: mm.Vocab, DTypeBytes: 2, TP: tp}
		return s, "", s.Validate()
	}
	name := mm.Name
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	base := strings.ToLower(name)
	for _, suf := range []string{"-instruct-2507", "-instruct", "-2507"} {
		base = strings.TrimSuffix(base, suf)
	}
	if sh, err := model.ShapeByName(base); err == nil {
		return sh.WithTP(tp), "", nil
	}
	if e, ok := extraShapes[base]; ok {
		return e.s.WithTP(tp), e.proxy, nil
	}
	return s, "", fmt.Errorf("model %q: no layer shape in the manifest and no preset (%s)", mm.Name, strings.Join(model.ShapeNames(), ", "))
}

// Resolved is a model ready to replay: the FPM, the host model (fitted by
// calibrate, else the default prior) and a name for reports.
type Resolved struct {
	FPM      model.FPM
	Host     model.HostModel
	Name     string
	Artifact *model.Artifact
	Notes    []string
}

// hostParams is what calibrate stores in an artifact's params.
type hostParams struct {
	Host *model.HostModel `json:"host,omitempty"`
}

// ResolveModel turns a MODEL argument into a model: the path of an
// artifact (its params.host, written by calibrate, replaces the default
// host model), "roofline" for the roofline prior from the manifest's
// hardware and model shape, or an ops spec ("ops", "ops:NAME", "ops:DIR")
// for the measured-operations prior of that shape (package datasets/opdb).
func ResolveModel(spec string, m *datasets.Manifest) (*Resolved, error) {
	r := &Resolved{Host: model.DefaultHostModel(), Name: spec}
	if spec == "roofline" || opdb.IsSpec(spec) {
		return resolvePrior(r, spec, m)
	}
	f, a, err := model.Load(spec)
	if err != nil {
		return nil, err
	}
	r.FPM, r.Artifact = f, a
	if len(a.Params) > 0 {
		var hp hostParams
		if err := json.Unmarshal(a.Params, &hp); err == nil && hp.Host != nil {
			if err := hp.Host.Validate(); err != nil {
				return nil, fmt.Errorf("%s: params.host: %w", spec, err)
			}
			r.Host = *hp.Host
			r.Notes = append(r.Notes, "host model from the artifact's params.host")
		}
	}
	return r, nil
}

// resolvePrior builds a prior (roofline or ops) from the manifest's
// hardware and model shape.
func resolvePrior(r *Resolved, spec string, m *datasets.Manifest) (*Resolved, error) {
	hw, err := HardwareOf(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", spec, err)
	}
	sh, note, err := ShapeOf(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", spec, err)
	}
	if note != "" {
		r.Notes = append(r.Notes, spec+": "+note)
	}
	if spec != "roofline" {
		o, err := opdb.Prior(spec, hw, sh)
		if err != nil {
			return nil, err
		}
		r.FPM, r.Name = o, fmt.Sprintf("ops(%s, %s)", o.Database(), sh.Name)
		return r, nil
	}
	rf := model.NewRoofline(hw, sh)
	if err := rf.Validate(); err != nil {
		return nil, err
	}
	r.FPM, r.Name = rf.Prepare(), fmt.Sprintf("roofline(%s, %s)", hw.Name, sh.Name)
	return r, nil
}

// LinearFromRoofline linearises a roofline prior into a Linear FPM over
// const, prefill_tokens, prefill_attn, decode_requests and decode_kv_tokens:
// the fixed cost plus weight streaming once per step, GEMM compute per
// token, attention FLOPs per (query, key) pair and KV bytes per decode KV
// token at the roofline's efficiencies. calibrate starts from it.
func LinearFromRoofline(r model.Roofline) *model.Linear {
	s := r.Shape
	peak := r.HW.PeakFLOPs()
	bw := r.HW.BandwidthBytes()
	fixed := r.FixedNs + float64(s.Layers)*r.PerLayerNs + float64(s.StreamedWeightBytes())/(bw*r.WeightBWEff)*1e9
	perTok := 2 * (s.GEMMParamsPerGPU() + s.LMHeadParamsPerGPU()/64) / (peak * r.GEMMEff) * 1e9
	attn := s.AttnFLOPsPerPair() / (peak * r.AttnEff) * 1e9
	perDecode := 2 * (s.GEMMParamsPerGPU() + s.LMHeadParamsPerGPU()) / (peak * r.GEMMEff) * 1e9
	kv := float64(s.KVBytesPerToken()) / (bw * r.KVBWEff) * 1e9
	l, _ := model.NewLinear(
		[]string{model.TermConst, model.TermPrefillTokens, model.TermPrefillAttn, model.TermDecodeRequests, model.TermDecodeKVTokens},
		[]float64{fixed, perTok, attn, perDecode, kv})
	return l
}
