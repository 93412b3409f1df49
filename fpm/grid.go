package fpm

import (
	"fmt"
	"math"
	"sort"
)

// Behaviour of a Grid outside the benchmarked domain (Grid.Outside).
const (
	// OutsideClamp holds the coordinate at the nearest edge of the domain
	// and flags the lookup (Lookup.Clamped). The default: it never invents
	// a trend the data does not show, and it under-predicts steps larger
	// than anything benchmarked, which Lookup makes visible.
	OutsideClamp = "clamp"
	// OutsideLinear extends the edge segment's slope beyond the domain
	// (floored at zero), and also flags the lookup. Beyond the largest batch
	// this holds the edge's marginal cost per request, close to holding
	// utilisation once the step is compute-bound.
	OutsideLinear = "linear"
)

// Interpolation of the prefill axis (PrefillGrid.Interp).
const (
	// InterpLinear interpolates time linearly in prefill tokens.
	InterpLinear = "linear"
	// InterpSqrt interpolates √time linearly in tokens and squares the
	// result: exact for t = (a + b·tokens)², close for the quadratic growth
	// that attention gives long prefills (AIC uses sqrt interpolation
	// along the sequence axis of context attention).
	InterpSqrt = "sqrt"
)

// DecodeGrid holds benchmarked decode step times on a rectangular grid of
// batch size × KV tokens per request (the context each decode request
// reads; a step's total decode KV is Batch × KVPerRequest). A benchmark grid
// is naturally rectangular in these coordinates. Cells never measured are
// negative (JSON has no NaN).
type DecodeGrid struct {
	Batch        []float64   `json:"batch"`
	KVPerRequest []float64   `json:"kv_per_request"`
	Ns           [][]float64 `json:"ns"` // [batch index][kv index]
	// LogAxes interpolates in log(batch) and log(kv) (for log-spaced
	// benchmark axes); bilinear in the raw coordinates otherwise.
	LogAxes bool `json:"log_axes,omitempty"`
}

// PrefillGrid holds benchmarked prefill step times over prefill tokens.
type PrefillGrid struct {
	Tokens []float64 `json:"tokens"`
	Ns     []float64 `json:"ns"`
	Interp string    `json:"interp,omitempty"` // InterpLinear (default) or InterpSqrt
}

// Grid is the interpolating forward-pass model over benchmark coordinates,
// as Dynamo's planner profiles and AIConfigurator do (docs/architecture.md#forward-pass-model).
//
//   - decode step (B requests, K KV tokens): bilinear interpolation of the
//     decode grid at (B, K/B);
//
//   - prefill step (T tokens): 1-D interpolation of the prefill grid at T
//     (the prefill KV tokens a chunk reads are not a coordinate of this
//     form; use the linear form where prefix hits matter);
//
//   - mixed step: the AIC marginal-decode composition
//
//     t = prefill(T + B) + max(0, decode(B, K/B) − decode(B, kv_floor))
//
//     where kv_floor is the smallest benchmarked KV per request. The B decode
//     tokens go through the GEMMs with the prefill chunk, so they are priced
//     as prefill tokens; the bracket adds what their attention reads cost
//     beyond the cheapest benchmarked context, so the per-step fixed cost
//     (weights, launches) that both grids contain is paid once.
//
// Outside the domain the lookup follows Outside (OutsideClamp by default)
// and is flagged in Lookup; a missing cell is bridged by the measured
// corners around it, and flagged too.
type Grid struct {
	Decode    *DecodeGrid        `json:"decode,omitempty"`
	Prefill   *PrefillGrid       `json:"prefill,omitempty"`
	Outside   string             `json:"outside,omitempty"`
	Residuals *ResidualQuantiles `json:"residuals,omitempty"`
}

// Lookup reports how a Grid prediction was made.
type Lookup struct {
	// Clamped names the axes ("batch", "kv_per_request", "prefill_tokens")
	// on which the query fell outside the benchmarked domain.
	Clamped []string
	// Missing is set when a cell around the query was never measured, or
	// the step needed a grid (decode or prefill) the model does not have.
	Missing bool
}

// InDomain says the lookup neither left the domain nor met a gap.
func (l Lookup) InDomain() bool { return len(l.Clamped) == 0 && !l.Missing }

func (l *Lookup) clamp(axis string) {
	for _, a := range l.Clamped {
		if a == axis {
			return
		}
	}
	l.Clamped = append(l.Clamped, axis)
}

// Validate checks axes (ascending, positive for log axes), shapes and the
// Outside and Interp settings.
func (g *Grid) Validate() error {
	switch g.Outside {
	case "", OutsideClamp, OutsideLinear:
	default:
		return fmt.Errorf("fpm: grid: outside %q: want %q or %q", g.Outside, OutsideClamp, OutsideLinear)
	}
	if g.Decode == nil && g.Prefill == nil {
		return fmt.Errorf("fpm: grid: neither a decode nor a prefill grid")
	}
	if d := g.Decode; d != nil {
		if err := checkAxis("batch", d.Batch, d.LogAxes); err != nil {
			return err
		}
		if err := checkAxis("kv_per_request", d.KVPerRequest, d.LogAxes); err != nil {
			return err
		}
		if len(d.Ns) != len(d.Batch) {
			return fmt.Errorf("fpm: grid: decode has %d rows of times for %d batch sizes", len(d.Ns), len(d.Batch))
		}
		any := false
		for i, row := range d.Ns {
			if len(row) != len(d.KVPerRequest) {
				return fmt.Errorf("fpm: grid: decode row %d (batch %g) has %d times for %d kv values", i, d.Batch[i], len(row), len(d.KVPerRequest))
			}
			for _, v := range row {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return fmt.Errorf("fpm: grid: decode time %v at batch %g", v, d.Batch[i])
				}
				if v >= 0 {
					any = true
				}
			}
		}
		if !any {
			return fmt.Errorf("fpm: grid: decode grid has no measured cell")
		}
	}
	if p := g.Prefill; p != nil {
		if err := checkAxis("prefill_tokens", p.Tokens, false); err != nil {
			return err
		}
		if len(p.Ns) != len(p.Tokens) {
			return fmt.Errorf("fpm: grid: prefill has %d times for %d token values", len(p.Ns), len(p.Tokens))
		}
		for i, v := range p.Ns {
			if !(v >= 0) || math.IsInf(v, 0) {
				return fmt.Errorf("fpm: grid: prefill time %v at %g tokens (every prefill node needs a time)", v, p.Tokens[i])
			}
		}
		switch p.Interp {
		case "", InterpLinear, InterpSqrt:
		default:
			return fmt.Errorf("fpm: grid: prefill interp %q: want %q or %q", p.Interp, InterpLinear, InterpSqrt)
		}
	}
	return nil
}

func checkAxis(name string, xs []float64, log bool) error {
	if len(xs) == 0 {
		return fmt.Errorf("fpm: grid: axis %s is empty", name)
	}
	for i, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return fmt.Errorf("fpm: grid: axis %s value %v", name, x)
		}
		if log && x <= 0 {
			return fmt.Errorf("fpm: grid: axis %s value %v on a log axis", name, x)
		}
		if i > 0 && !(x > xs[i-1]) {
			return fmt.Errorf("fpm: grid: axis %s not strictly ascending at %v", name, x)
		}
	}
	return nil
}

// PredictNs implements FPM.
func (g *Grid) PredictNs(f Features) float64 {
	ns, _ := g.Predict(f)
	return ns
}

// PredictIntervalNs implements IntervalFPM from the residual quantiles.
func (g *Grid) PredictIntervalNs(f Features, coverage float64) (mid, lo, hi float64) {
	mid = g.PredictNs(f)
	lo, hi = g.Residuals.Interval(mid, coverage)
	return mid, lo, hi
}

// Predict returns the predicted step time and how it was obtained.
func (g *Grid) Predict(f Features) (float64, Lookup) {
	var lk Lookup
	hasPrefill := f.PrefillTokens > 0 || f.PrefillRequests > 0
	hasDecode := f.DecodeRequests > 0
	var t float64
	switch {
	case hasPrefill && hasDecode:
		t = g.prefill(f.PrefillTokens+f.DecodeRequests, &lk)
		if g.Decode == nil {
			lk.Missing = true
			break
		}
		kv := f.DecodeKVTokens / f.DecodeRequests
		full := g.decode(f.DecodeRequests, kv, &lk)
		var scratch Lookup // the floor lookup is in domain on the kv axis by construction
		floor := g.decode(f.DecodeRequests, g.Decode.KVPerRequest[0], &scratch)
		if d := full - floor; d > 0 {
			t += d
		}
	case hasPrefill:
		t = g.prefill(f.PrefillTokens, &lk)
	case hasDecode:
		if g.Decode == nil {
			lk.Missing = true
			break
		}
		t = g.decode(f.DecodeRequests, f.DecodeKVTokens/f.DecodeRequests, &lk)
	}
	if t < 0 {
		t = 0
	}
	return t, lk
}

func (g *Grid) linearOutside() bool { return g.Outside == OutsideLinear }

// locate returns the segment index i and fraction t of x on axis xs:
// x = xs[i] + t·(xs[i+1]−xs[i]). Outside the axis t is clamped to [0, 1]
// (OutsideClamp) or left beyond it (OutsideLinear); out reports either.
func locate(xs []float64, x float64, linear bool) (i int, t float64, out bool) {
	n := len(xs)
	if n == 1 {
		return 0, 0, x != xs[0]
	}
	switch {
	case x < xs[0]:
		i, out = 0, true
	case x > xs[n-1]:
		i, out = n-2, true
	default:
		i = sort.SearchFloat64s(xs, x) - 1 // xs[i] < x <= xs[i+1]
		if i < 0 {
			i = 0
		}
		if i > n-2 {
			i = n - 2
		}
	}
	t = (x - xs[i]) / (xs[i+1] - xs[i])
	if out && !linear {
		t = math.Max(0, math.Min(1, t))
	}
	return i, t, out
}

func (g *Grid) prefill(tokens float64, lk *Lookup) float64 {
	p := g.Prefill
	if p == nil {
		lk.Missing = true
		return 0
	}
	i, t, out := locate(p.Tokens, tokens, g.linearOutside())
	if out {
		lk.clamp("prefill_tokens")
	}
	if len(p.Tokens) == 1 {
		return p.Ns[0]
	}
	if p.Interp == InterpSqrt {
		a, b := math.Sqrt(p.Ns[i]), math.Sqrt(p.Ns[i+1])
		v := a + t*(b-a)
		if v < 0 {
			return 0
		}
		return v * v
	}
	return p.Ns[i] + t*(p.Ns[i+1]-p.Ns[i])
}

func (g *Grid) decode(batch, kv float64, lk *Lookup) float64 {
	d := g.Decode
	bx, kx := batch, kv
	bs, ks := d.Batch, d.KVPerRequest
	if d.LogAxes {
		bx, kx = logPos(batch), logPos(kv)
		bs, ks = logAxis(bs), logAxis(ks)
	}
	lin := g.linearOutside()
	i, t, outB := locate(bs, bx, lin)
	j, u, outK := locate(ks, kx, lin)
	if outB {
		lk.clamp("batch")
	}
	if outK {
		lk.clamp("kv_per_request")
	}
	// Corners and their bilinear weights; a single-node axis has one.
	type corner struct {
		i, j int
		w    float64
	}
	var cs [4]corner
	nc := 0
	for di := 0; di < 2; di++ {
		if di == 1 && len(bs) == 1 {
			break
		}
		wi := 1 - t
		if di == 1 {
			wi = t
		}
		for dj := 0; dj < 2; dj++ {
			if dj == 1 && len(ks) == 1 {
				break
			}
			wj := 1 - u
			if dj == 1 {
				wj = u
			}
			if len(bs) == 1 {
				wi = 1
			}
			if len(ks) == 1 {
				wj = 1
			}
			cs[nc] = corner{i + di, j + dj, wi * wj}
			nc++
		}
	}
	var sum, wsum float64
	complete := true
	for _, c := range cs[:nc] {
		v := d.Ns[c.i][c.j]
		if v < 0 {
			complete = false
			continue
		}
		sum += c.w * v
		wsum += c.w
	}
	if complete {
		return sum
	}
	lk.Missing = true
	if wsum > 1e-12 {
		return sum / wsum
	}
	return d.nearest(i, j)
}

// nearest returns the measured cell closest (in index distance) to (i, j).
func (d *DecodeGrid) nearest(i, j int) float64 {
	best, bestD := 0.0, math.MaxInt
	for a, row := range d.Ns {
		for b, v := range row {
			if v < 0 {
				continue
			}
			dist := (a-i)*(a-i) + (b-j)*(b-j)
			if dist < bestD {
				best, bestD = v, dist
			}
		}
	}
	return best
}

func logPos(x float64) float64 {
	if x < 1e-9 {
		x = 1e-9
	}
	return math.Log(x)
}

func logAxis(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = logPos(x)
	}
	return out
}
