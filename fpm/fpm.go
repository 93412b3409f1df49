package fpm

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
)

// Features is the composition of one engine step that forward-pass models
// price (docs/architecture.md#forward-pass-model). Counts are float64 so that models and solvers share
// one representation; they hold whole numbers. A feature its source did not
// record (an older dataset without the column or the per-request rows to
// derive it) is NaN; Unknown names them. Package features computes them from
// a steps row.
type Features struct {
	// Prefill work: tokens computed this step, KV tokens those chunks read
	// (prefix hits and earlier chunks), and Σ over prefill requests of
	// (chunk length × context length read), the attention term.
	PrefillTokens   float64
	PrefillKVTokens float64
	PrefillAttn     float64
	PrefillRequests float64
	// Decode work: requests decoding one token, and the KV tokens they read.
	DecodeRequests float64
	DecodeKVTokens float64
	// Ragged decode batches: the longest context one decode request reads
	// (attention kernels that give each request its own program wait for
	// the longest), and the population variance of the decode contexts.
	DecodeMaxKVTokens float64
	DecodeKVVar       float64
	// PaddedBatch is the CUDA-graph bucket the decode batch ran at (equal
	// to DecodeRequests when eager or not padded).
	PaddedBatch float64
	// Admission overhead: requests shipped through scheduled_new_reqs this
	// step and the prompt tokens they carry.
	NewRequests  float64
	NewReqTokens float64
}

// Unknown lists the features that are NaN (not recorded by the source), by
// their steps-table column names; nil when every feature is known.
func (f Features) Unknown() []string {
	var out []string
	for _, c := range []struct {
		v    float64
		name string
	}{{f.PrefillTokens, "sum_prefill_tokens"}, {f.PrefillKVTokens, "sum_prefill_kv_tokens"}, {f.PrefillAttn, "sum_prefill_attn"},
		{f.PrefillRequests, "num_prefill_requests"}, {f.DecodeRequests, "num_decode_requests"}, {f.DecodeKVTokens, "sum_decode_kv_tokens"},
		{f.DecodeMaxKVTokens, "max_decode_kv_tokens"}, {f.DecodeKVVar, "var_decode_kv_tokens"}, {f.PaddedBatch, "cuda_graph_size"},
		{f.NewRequests, "num_new_reqs"}, {f.NewReqTokens, "new_req_tokens"}} {
		if math.IsNaN(c.v) {
			out = append(out, c.name)
		}
	}
	return out
}

// MarshalJSON writes an unknown (NaN) feature as null, since JSON has no
// NaN: a step replay of a dataset without step_requests reports such steps.
func (f Features) MarshalJSON() ([]byte, error) {
	v := reflect.ValueOf(f)
	m := make(map[string]*float64, v.NumField())
	for i := range v.NumField() {
		var p *float64
		if x := v.Field(i).Float(); !math.IsNaN(x) {
			p = &x
		}
		m[v.Type().Field(i).Name] = p
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads what MarshalJSON writes: null is unknown (NaN).
// Names that are not features are ignored, as encoding/json does.
func (f *Features) UnmarshalJSON(b []byte) error {
	var m map[string]*float64
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	v := reflect.ValueOf(f).Elem()
	for name, x := range m {
		field := v.FieldByName(name)
		switch {
		case !field.IsValid():
		case x == nil:
			field.SetFloat(math.NaN())
		default:
			field.SetFloat(*x)
		}
	}
	return nil
}

// Kind classifies a step from its features, as datasets' kind column does.
func (f Features) Kind() string {
	switch {
	case f.PrefillRequests > 0 && f.DecodeRequests > 0:
		return "mixed"
	case f.PrefillRequests > 0:
		return "prefill"
	default:
		return "decode"
	}
}

// FPM is a forward-pass model: it predicts a step's device time from its
// composition.
type FPM interface {
	// PredictNs returns the predicted duration of the step in nanoseconds.
	PredictNs(f Features) float64
}

// IntervalFPM is an FPM that can also say how sure it is.
type IntervalFPM interface {
	FPM
	// PredictIntervalNs returns the prediction and a central interval of
	// the given coverage (e.g. 0.9) in nanoseconds.
	PredictIntervalNs(f Features, coverage float64) (mid, lo, hi float64)
}

// Pricer is an IntervalFPM that also says how it priced a step: which
// kind model, inside or outside its measured hull (Recipe).
type Pricer interface {
	IntervalFPM
	Price(f Features, coverage float64) Pricing
}

// DefaultLevel is the nominal coverage of prediction intervals when
// neither the model nor the caller names one.
const DefaultLevel = 0.9

// LevelOf is the nominal coverage an FPM's intervals were calibrated at:
// a Recipe's Level, else DefaultLevel.
func LevelOf(m FPM) float64 {
	if r, ok := m.(*Recipe); ok && r.Level > 0 {
		return r.Level
	}
	return DefaultLevel
}

// IntervalLevel resolves the coverage of the intervals a caller asked m
// for: 0 asks for m's own (LevelOf), a negative level for none. It is 0
// (no intervals) when m is not an IntervalFPM, or is one that records no
// uncertainty (NoUncertainty): its intervals would have zero width.
func IntervalLevel(m FPM, requested float64) float64 {
	if _, ok := m.(IntervalFPM); !ok || requested < 0 || NoUncertainty(m, "") != "" {
		return 0
	}
	if requested == 0 {
		return LevelOf(m)
	}
	return requested
}

// Bound is one edge of an IntervalFPM's interval as an FPM: the lower
// edge at coverage Level, or the upper one with Upper set. Re-simulating a
// workload with the two edges propagates step-time intervals to request
// latencies.
type Bound struct {
	M     IntervalFPM
	Level float64
	Upper bool
}

// PredictNs implements FPM.
func (b Bound) PredictNs(f Features) float64 {
	_, lo, hi := b.M.PredictIntervalNs(f, b.Level)
	if b.Upper {
		return hi
	}
	return lo
}

// uncertain is an IntervalFPM that can say whether it recorded any
// uncertainty (residual quantiles or a coefficient covariance): without,
// every interval it gives is its prediction, zero wide.
type uncertain interface {
	HasUncertainty() bool
}

// prior is a prior (PreparedRoofline, Ops) that calibration can scale:
// until it does, a model fitted to nothing.
type prior interface {
	calibrated() bool
}

// NoUncertainty says why m's predictions carry no interval, naming m by
// name ("" when they do): a model that is no IntervalFPM (a prior), or one
// that records neither residuals nor a coefficient covariance (a calibrated
// linear artifact without them). Reports print this line instead of an
// interval of zero width.
func NoUncertainty(m FPM, name string) string {
	what := ""
	p, isPrior := m.(prior)
	if u, ok := m.(uncertain); ok && !u.HasUncertainty() {
		what = "a model that records no residuals and no coefficient covariance"
		if isPrior && !p.calibrated() {
			what = "a prior with no prediction intervals"
		}
	} else if _, ok := m.(IntervalFPM); !ok {
		what = "a prior with no prediction intervals"
	}
	if what == "" {
		return ""
	}
	if name == "" {
		name = "given"
	}
	return fmt.Sprintf("no uncertainty recorded: the model %s is %s; steplab fit or steplab calibrate gives one", name, what)
}

// HasUncertainty reports whether m's intervals have any width.
func (m *Linear) HasUncertainty() bool {
	return len(m.CoefCov) > 0 || (m.Residuals != nil && len(m.Residuals.P) > 0)
}

// HasUncertainty reports whether g's intervals have any width.
func (g *Grid) HasUncertainty() bool { return g.Residuals != nil && len(g.Residuals.P) > 0 }

// HasUncertainty reports whether any kind of r has residuals or a
// coefficient covariance.
func (r *Recipe) HasUncertainty() bool {
	for _, k := range r.Kinds {
		if len(k.Residuals) > 0 || len(k.CoefCov) > 0 {
			return true
		}
		if g := k.Regimes; g != nil {
			for _, p := range g.Pieces {
				if len(p.CoefCov) > 0 {
					return true
				}
			}
		}
	}
	return false
}

// Extrapolating is an FPM that knows when it prices a step past what it
// measured (the ops prior past its kernel tables' grid): simulators count
// such lookups per engine (sim.Stats.ExtrapolatedOps) so a run says how
// much of it rests on extrapolation.
type Extrapolating interface {
	FPM
	// PredictExtNs is PredictNs and the number of the step's operations
	// priced past the measured range.
	PredictExtNs(f Features) (ns float64, extrapolated int)
}
