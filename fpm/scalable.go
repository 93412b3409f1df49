package fpm

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
)

// Scalable is a forward-pass model whose terms steplab calibrate moves:
// each term's time multiplied by a factor. A linear model's terms are its
// basis terms (the factor scales a coefficient); a prior's are the parts
// it composes a step of (PriorTerms: the factor scales what the prior
// measured or derived for that part), so a calibrated prior is still that
// prior, with its parts re-weighted by what the recorded run showed.
type Scalable interface {
	FPM
	// ScaleTerms names the terms, in a fixed order.
	ScaleTerms() []string
	// ScaleValues are the model's present value of each term: a linear
	// model's coefficients, a prior's multipliers (1 until scaled).
	ScaleValues() []float64
	// Scaled is the model with each term's value multiplied by mult[i]
	// (ScaleTerms' order). All ones give a model that predicts exactly
	// what this one does.
	Scaled(mult []float64) (Scalable, error)
	// WithResiduals is the model with prediction intervals from residual
	// quantiles (what calibrate measured its fit to leave).
	WithResiduals(q *ResidualQuantiles) Scalable
	// Artifact is the model as an artifact that Load reads back into the
	// same model (training, metrics and provenance left to the caller).
	Artifact() (*Artifact, error)
}

// The terms of a prior (Roofline, Ops) that calibration scales. Each is a
// part of the step the prior prices on its own, and so a part a recorded
// run can find over- or under-priced on its own:
const (
	// PriorTermGEMM: the projections, MLP (experts included) and LM head:
	// weight streaming at small batches, tensor-core time at large ones.
	// It sets a decode step's time, and so ITL.
	PriorTermGEMM = "gemm"
	// PriorTermPrefillAttn: the prefill (context) attention, which grows
	// with the square of the prompt and sets long prompts' TTFT.
	PriorTermPrefillAttn = "prefill_attn"
	// PriorTermDecodeAttn: the decode attention's KV reads, which grow
	// with the context and set ITL's growth along a request.
	PriorTermDecodeAttn = "decode_attn"
	// PriorTermOverhead: the roofline's fixed per-step and per-layer
	// overheads (launches, sampler, small kernels), hand-set and measured
	// on nothing; the operations prior has no such term (its small
	// kernels are measured or priced by their bytes).
	PriorTermOverhead = "overhead"
)

// ScaleTerms implements Scalable: the linear model's terms.
func (m *Linear) ScaleTerms() []string { return append([]string(nil), m.Terms...) }

// ScaleValues implements Scalable: the coefficients.
func (m *Linear) ScaleValues() []float64 { return append([]float64(nil), m.Coef...) }

// Scaled implements Scalable: each coefficient times its multiplier (no
// interval: the coefficients' uncertainty was not fitted at these values).
func (m *Linear) Scaled(mult []float64) (Scalable, error) {
	if err := checkMult(m.Terms, mult); err != nil {
		return nil, err
	}
	coef := make([]float64, len(m.Coef))
	for i, c := range m.Coef {
		coef[i] = c * mult[i]
	}
	return NewLinear(m.Terms, coef)
}

// WithResiduals implements Scalable.
func (m *Linear) WithResiduals(q *ResidualQuantiles) Scalable {
	c := *m
	c.Residuals = q
	return &c
}

// Artifact implements Scalable.
func (m *Linear) Artifact() (*Artifact, error) { return LinearArtifact(m), nil }

// checkMult refuses a multiplier vector that does not match the terms or
// holds a value that is not a finite positive number.
func checkMult(terms []string, mult []float64) error {
	if len(mult) != len(terms) {
		return fmt.Errorf("fpm: %d multipliers for %d terms (%v)", len(mult), len(terms), terms)
	}
	for i, v := range mult {
		if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			return fmt.Errorf("fpm: multiplier of %s = %v: must be finite and > 0", terms[i], v)
		}
	}
	return nil
}

// rooflineArtifactParams is how a roofline artifact stores its model: the
// roofline (hardware, shape, parameters) and the multipliers on its terms.
type rooflineArtifactParams struct {
	Roofline *Roofline   `json:"roofline"`
	Scales   *TermScales `json:"scales,omitempty"`
}

// TermScales are the multipliers calibrate fitted on a roofline's terms
// (PriorTerms; 0 reads as 1).
type TermScales struct {
	GEMM        float64 `json:"gemm,omitempty"`
	PrefillAttn float64 `json:"prefill_attn,omitempty"`
	DecodeAttn  float64 `json:"decode_attn,omitempty"`
	Overhead    float64 `json:"overhead,omitempty"`
}

// rooflineOf builds the prior a roofline artifact describes.
func rooflineOf(a *Artifact) (FPM, error) {
	var p rooflineArtifactParams
	if err := json.Unmarshal(a.Params, &p); err != nil {
		return nil, fmt.Errorf("fpm: roofline artifact: params: %w", err)
	}
	if p.Roofline == nil {
		return nil, fmt.Errorf("fpm: roofline artifact: params.roofline is missing")
	}
	// An artifact written before links stated their domains was priced
	// with its TP group on its fastest link: read it so.
	ics := slices.Clone(p.Roofline.HW.Interconnects)
	for i, l := range ics {
		if l.GPUs == 0 && l.JoinsGPUs() {
			ics[i].GPUs = p.Roofline.Shape.TPDegree()
		}
	}
	p.Roofline.HW.Interconnects = ics
	if err := p.Roofline.Validate(); err != nil {
		return nil, fmt.Errorf("fpm: roofline artifact: %w", err)
	}
	r := p.Roofline.Prepare()
	if s := p.Scales; s != nil {
		for _, v := range []float64{s.GEMM, s.PrefillAttn, s.DecodeAttn, s.Overhead} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return nil, fmt.Errorf("fpm: roofline artifact: params.scales: %v: must be finite and >= 0", v)
			}
		}
		r.c.scale = [nRooflineTerms]float64{orOne(s.GEMM), orOne(s.PrefillAttn), orOne(s.DecodeAttn), orOne(s.Overhead)}
	}
	r.Residuals = a.Residuals
	return r, nil
}

// StepCoster is a Scalable with per-step costs its terms do not carry:
// the ops prior's engine step times (OpsEngine.GraphStepNs, EagerStepNs),
// which a multiplier cannot move from zero. A fit on recorded steps sets
// them beside the multipliers.
type StepCoster interface {
	Scalable
	// AddStepCosts is the model with decodeNs added to every decode-only
	// step and prefillNs to every step with prefill work.
	AddStepCosts(decodeNs, prefillNs float64) (Scalable, error)
}

// AddStepCosts implements StepCoster: the engine's graph and eager step
// times grown by decodeNs and prefillNs.
func (o *Ops) AddStepCosts(decodeNs, prefillNs float64) (Scalable, error) {
	e := o.engine
	e.GraphStepNs += decodeNs
	e.EagerStepNs += prefillNs
	return o.WithEngine(e)
}

// TermTimes prices each of a Scalable's terms in a step on its own: the
// time that doubling the term's multiplier adds, which is the term's time
// wherever the model is linear in its multipliers (a linear model, the
// roofline; the ops prior but for an eager step's host wait).
type TermTimes struct {
	base    Scalable
	doubled []Scalable
}

// NewTermTimes prices the terms of m at the indices terms (ScaleTerms'
// order).
func NewTermTimes(m Scalable, terms []int) (*TermTimes, error) {
	t := &TermTimes{base: m}
	n := len(m.ScaleTerms())
	for _, i := range terms {
		if i < 0 || i >= n {
			return nil, fmt.Errorf("fpm: term index %d of %d terms", i, n)
		}
		mult := make([]float64, n)
		for k := range mult {
			mult[k] = 1
		}
		mult[i] = 2
		d, err := m.Scaled(mult)
		if err != nil {
			return nil, err
		}
		t.doubled = append(t.doubled, d)
	}
	return t, nil
}

// Of fills out (one per term) with each term's time in the step f, in
// ns, and returns the model's prediction.
func (t *TermTimes) Of(f Features, out []float64) float64 {
	total := t.base.PredictNs(f)
	for i, d := range t.doubled {
		out[i] = d.PredictNs(f) - total
	}
	return total
}
