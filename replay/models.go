package replay

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/model"
)

// HardwareOf resolves the manifest's GPU to a hardware description.
func HardwareOf(m *datasets.Manifest) (model.Hardware, error) {
	if m == nil || m.Hardware == nil || m.Hardware.GPUName == "" {
		return model.Hardware{}, fmt.Errorf("manifest names no GPU")
	}
	return model.LookupHardware(m.Hardware.GPUName)
}

func jsonMarshal(v any) (json.RawMessage, error) { return json.Marshal(v) }

// ShapeOf resolves the manifest's model to a shape: its recorded layer
// shape, else the catalogue's (model.LookupModel). note carries the
// catalogue's notes on the shape (what was derived or resolved loosely).
func ShapeOf(m *datasets.Manifest) (s model.Shape, note string, err error) {
	if m == nil || m.Model == nil {
		return s, "", fmt.Errorf("manifest has no model section")
	}
	mm := m.Model
	tp := max(1, mm.TensorParallel)
	if mm.Layers > 0 && mm.Hidden > 0 {
		s = model.Shape{Name: mm.Name, Layers: mm.Layers, Hidden: mm.Hidden, Heads: mm.Heads, KVHeads: mm.KVHeads, HeadDim: mm.HeadDim,
			Intermediate: mm.Intermediate, Vocab: mm.Vocab, DType: model.DTypeBF16, TP: tp}
		return s, "", s.Validate()
	}
	sh, err := model.LookupModel(mm.Name)
	if err != nil {
		return s, "", fmt.Errorf("no layer shape in the manifest: %w", err)
	}
	return sh.WithTP(tp), strings.Join(sh.Notes, "; "), nil
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
// host model), or "roofline" for the prior from the manifest's hardware
// and model shape.
func ResolveModel(spec string, m *datasets.Manifest) (*Resolved, error) {
	r := &Resolved{Host: model.DefaultHostModel(), Name: spec}
	if spec == "roofline" {
		hw, err := HardwareOf(m)
		if err != nil {
			return nil, fmt.Errorf("roofline: %w", err)
		}
		sh, note, err := ShapeOf(m)
		if err != nil {
			return nil, fmt.Errorf("roofline: %w", err)
		}
		if note != "" {
			r.Notes = append(r.Notes, "roofline: "+note)
		}
		rf := model.NewRoofline(hw, sh)
		if err := rf.Validate(); err != nil {
			return nil, err
		}
		r.FPM, r.Name = rf.Prepare(), fmt.Sprintf("roofline(%s, %s)", hw.Name, sh.Name)
		return r, nil
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

// LinearFromRoofline linearises a roofline prior into a Linear FPM over
// const, prefill_tokens, prefill_attn, decode_requests and decode_kv_tokens:
// the fixed cost plus weight streaming once per step, GEMM compute per
// token, attention FLOPs per (query, key) pair and KV bytes per decode KV
// token at the roofline's efficiencies. calibrate starts from it.
func LinearFromRoofline(r model.Roofline) *model.Linear {
	s := r.Shape
	peak := r.HW.PeakFLOPs()
	bw := r.HW.BandwidthBytes()
	// The efficiency curves at their large-x ends: a linear model's slopes
	// are the costs of large steps.
	streamed := float64(s.StreamedWeightBytes())
	gemmEff, attnEff, kvEff := r.GEMMEff.At(math.Inf(1)), r.AttnEff.At(math.Inf(1)), r.KVBWEff.At(math.Inf(1))
	fixed := r.FixedNs + float64(s.Layers)*r.PerLayerNs + streamed/(bw*r.WeightBWEff.At(streamed))*1e9
	perTok := 2 * (s.GEMMParamsPerGPU() + s.LMHeadParamsPerGPU()/64) / (peak * gemmEff) * 1e9
	attn := s.AttnFLOPsPerPair() / (peak * attnEff) * 1e9
	perDecode := 2 * (s.GEMMParamsPerGPU() + s.LMHeadParamsPerGPU()) / (peak * gemmEff) * 1e9
	kv := float64(s.KVBytesPerToken()) / (bw * kvEff) * 1e9
	l, _ := model.NewLinear(
		[]string{model.TermConst, model.TermPrefillTokens, model.TermPrefillAttn, model.TermDecodeRequests, model.TermDecodeKVTokens},
		[]float64{fixed, perTok, attn, perDecode, kv})
	return l
}
