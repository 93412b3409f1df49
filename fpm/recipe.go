package fpm

import (
	"fmt"
	"math"
	"slices"
)

// Regions: how a Recipe priced a step.
const (
	// RegionInterpolated: inside the kind's table hull, priced by the table.
	RegionInterpolated = "interpolated"
	// RegionExtrapolated: outside the hull, priced by the kind's linear form.
	RegionExtrapolated = "extrapolated"
	// RegionFitted: a kind with no table (its rows are not a benchmark
	// grid), priced by the linear form fitted to its rows.
	RegionFitted = "fitted"
	// RegionUnpriced: the recipe has no model for the step's kind; the
	// prediction is 0.
	RegionUnpriced = "unpriced"
	// RegionAll keys the residuals pooled over a kind's regions, used for a
	// region that has none of its own.
	RegionAll = "all"
)

// Regions lists the regions of a priced step in report order.
var Regions = []string{RegionInterpolated, RegionExtrapolated, RegionFitted, RegionUnpriced}

// ComposePrefillMarginalDecode is the composition of a mixed step from the
// prefill and decode kinds (see Recipe).
const ComposePrefillMarginalDecode = "prefill+marginal_decode"

// Kind indices of a Recipe, in Features.Kind() terms.
const (
	kindPrefill = iota
	kindDecode
	kindMixed
	nKinds
)

var recipeKinds = [nKinds]string{"prefill", "decode", "mixed"}

func kindOf(f *Features) int {
	switch {
	case f.PrefillRequests > 0 && f.DecodeRequests > 0:
		return kindMixed
	case f.PrefillRequests > 0:
		return kindPrefill
	}
	return kindDecode
}

// Recipe is the default forward-pass model: one model per step kind
// (prefill, decode, mixed), each picked from the data by the fit.
//
//   - Inside the measured hull of a kind's benchmark coordinates (its
//     Table, see Table for the hull) the step is interpolated.
//
//   - Outside it, or for a kind with no table, the kind's physical linear
//     form (non-negative coefficients over the roofline-shaped basis)
//     prices it, and the prediction says it was extrapolated. The form may
//     be split into Regimes along a coordinate (decode: the batch size),
//     one linear form per regime.
//
//   - A mixed step is priced as prefill plus the marginal cost of its
//     decode work (Compose) unless mixed steps were measured:
//
//     t = prefill(T + B) + max(0, decode(B, K) − decode(B, B·kv_floor), walk)
//
//     The B decode tokens go through the GEMMs with the chunk (priced as
//     prefill tokens); the bracket is what their attention reads cost
//     beyond the smallest measured context (the decode form at the decode
//     rows' own contexts, the longest included), so the fixed cost of a
//     pass is paid once. With Compose.DecodeWalk, walk is what those
//     reads cost when the attention kernel gives each decode row one
//     program per KV head over its whole context, as it gives a prefill
//     chunk's queries (no KV split in a mixed step): the prefill form's
//     cost per token of context its chunks read (prefill_kv_tokens, on
//     the piece that prices the step's prefill pass) times the longest
//     context beyond the floor. The programs of a small batch fit in one
//     wave and wait for the longest; a batch that fills more waves is
//     priced by the bracket, the KV read spread over the GPU.
//
// A kind's coordinates (Table.Axes) and terms are data in the artifact,
// resolved by name (Coord, Term): a new feature is a new name.
//
// Every prediction carries an interval (PredictIntervalNs, Price): the
// prediction's standard error (bootstrap of the coefficients, or of the
// node repeats) combined with the kind's residual quantiles for the
// region that priced it (ResidualQuantiles.IntervalSE).
type Recipe struct {
	// Level is the nominal coverage of the intervals the fit calibrated
	// (e.g. 0.9); callers may ask for another.
	Level float64      `json:"level"`
	Kinds []RecipeKind `json:"kinds"`

	byKind [nKinds]*RecipeKind
}

// RecipeKind is the model of one step kind.
type RecipeKind struct {
	Kind string `json:"kind"` // prefill, decode or mixed
	// Rows is the number of training rows of the kind.
	Rows int `json:"rows"`
	// Table interpolates inside the hull (nil: no benchmark grid).
	Table *Table `json:"table,omitempty"`
	// The linear form: terms, coefficients (with bootstrap intervals) and
	// their bootstrap covariance.
	Terms        []string      `json:"terms,omitempty"`
	Coefficients []Coefficient `json:"coefficients,omitempty"`
	CoefCov      [][]float64   `json:"coef_cov,omitempty"`
	// Regimes, instead of one linear form, splits it into pieces along a
	// coordinate (nil: one form, the fields above).
	Regimes *Regimes `json:"regimes,omitempty"`
	// Compose, on the mixed kind, prices mixed steps from the prefill and
	// decode kinds.
	Compose *Compose `json:"compose,omitempty"`
	// Residuals are relative residual quantiles by region (and RegionAll
	// pooled); Source says where each came from.
	Residuals map[string]*ResidualQuantiles `json:"residuals,omitempty"`
	// Extent is the kind's measured design: intervals widen with a step's
	// distance outside it (nil: no widening; a calibration, whose
	// residuals measured the traffic itself, drops it).
	Extent *Extent `json:"extent,omitempty"`

	lin *Linear
	res [len(regionIdx)]*ResidualQuantiles
	// at holds the residual quantiles and z at the recipe's Level, so that
	// a prediction at that level interpolates nothing.
	at levelCache
}

type levelCache struct {
	level, z float64
	lo, hi   [len(regionIdx)]quantileDev
}

func (k *RecipeKind) cacheLevel(level float64) {
	k.at = levelCache{level: level, z: NormalQuantile((1 + level) / 2)}
	for i, q := range k.res {
		k.at.lo[i], k.at.hi[i] = q.at(level)
	}
}

// Regimes is a kind's linear form split into pieces along one coordinate
// (fpm.Coord), each piece a linear form of its own: piece i prices the
// steps whose coordinate is at most Upper[i] and above Upper[i−1], the
// last piece the steps above every bound. A kernel that changes its
// launch with the batch (how many ways it splits the KV walk, whether its
// programs fit in one wave) prices the same features differently in each
// regime; the fit finds the bounds from the data.
type Regimes struct {
	Coord  string       `json:"coord"`
	Upper  []float64    `json:"upper"`
	Pieces []LinearForm `json:"pieces"`

	fn   TermFunc
	lins []*Linear
}

// LinearForm is one linear form as a recipe stores it: the rows it was
// fitted to, its terms, their coefficients (with bootstrap intervals) and
// the coefficients' bootstrap covariance.
type LinearForm struct {
	Rows         int           `json:"rows"`
	Terms        []string      `json:"terms"`
	Coefficients []Coefficient `json:"coefficients"`
	CoefCov      [][]float64   `json:"coef_cov,omitempty"`
}

// validate checks the coordinate, the bounds (finite, strictly
// ascending, one fewer than the pieces) and every piece, and builds them.
func (g *Regimes) validate() error {
	fn, err := Coord(g.Coord)
	if err != nil {
		return fmt.Errorf("regimes: %w", err)
	}
	if len(g.Pieces) != len(g.Upper)+1 {
		return fmt.Errorf("regimes: %d pieces for %d bounds: want one more piece than bounds", len(g.Pieces), len(g.Upper))
	}
	for i, u := range g.Upper {
		if math.IsNaN(u) || math.IsInf(u, 0) || (i > 0 && u <= g.Upper[i-1]) {
			return fmt.Errorf("regimes: upper bounds %v: want finite and strictly ascending", g.Upper)
		}
	}
	g.fn, g.lins = fn, make([]*Linear, len(g.Pieces))
	for i, p := range g.Pieces {
		if len(p.Terms) == 0 {
			return fmt.Errorf("regimes: piece %d has no terms", i)
		}
		m, err := linearOf(p.Terms, p.Coefficients, p.CoefCov, nil)
		if err != nil {
			return fmt.Errorf("regimes: piece %d: %w", i, err)
		}
		g.lins[i] = m
	}
	return nil
}

// Range says which steps piece i prices, e.g. "decode_requests <= 32".
func (g *Regimes) Range(i int) string {
	switch {
	case len(g.Upper) == 0:
		return "all"
	case i == 0:
		return fmt.Sprintf("%s <= %g", g.Coord, g.Upper[0])
	case i >= len(g.Upper):
		return fmt.Sprintf("%s > %g", g.Coord, g.Upper[len(g.Upper)-1])
	}
	return fmt.Sprintf("%g < %s <= %g", g.Upper[i-1], g.Coord, g.Upper[i])
}

// Piece returns the index of the piece that prices f.
func (g *Regimes) Piece(f Features) int {
	x := g.fn(f)
	i := 0 // few bounds: a scan beats a search
	for i < len(g.Upper) && x > g.Upper[i] {
		i++
	}
	return i
}

// Compose says how mixed steps are composed.
type Compose struct {
	Rule string `json:"rule"` // ComposePrefillMarginalDecode
	// KVFloorPerRequest is the context per request whose decode reads the
	// composition takes as already paid: the smallest measured one.
	KVFloorPerRequest float64 `json:"kv_floor_per_request"`
	// DecodeWalk prices the decode rows' attention at least as the walk
	// of a prefill chunk's programs over the longest decode context (see
	// Recipe): set when the prefill form prices the context its chunks
	// read (prefill points at a context identify it).
	DecodeWalk bool `json:"decode_walk,omitempty"`
}

// Pricing is a recipe prediction and how it was made.
type Pricing struct {
	Ns, Lo, Hi float64
	// Kind is the kind model that priced the step ("mixed" for a composed
	// mixed step).
	Kind string
	// Region is RegionInterpolated, RegionExtrapolated, RegionFitted or
	// RegionUnpriced; a composed step takes the furthest of its parts'
	// (unpriced, then extrapolated, then fitted).
	Region string
	// Composed is set for a mixed step priced from prefill and decode.
	Composed bool
}

// regionIdx orders the regions by how far a step is from what was
// measured, so that a composed step takes the max of its parts'.
var regionIdx = [...]string{RegionInterpolated, RegionFitted, RegionExtrapolated, RegionUnpriced}

const (
	rInterp = iota
	rFitted
	rExtrap
	rUnpriced
)

// estimate is a point prediction, its standard error and its region.
type estimate struct {
	ns, se float64
	region int
}

// Validate checks every kind (known, once each; a table or a linear form,
// or a composition that has prefill and decode kinds to compose), builds
// their models and resolves the residuals; a validated recipe is ready to
// predict.
func (r *Recipe) Validate() error {
	if !(r.Level > 0 && r.Level < 1) {
		return fmt.Errorf("fpm: recipe: level %v: want (0, 1)", r.Level)
	}
	if len(r.Kinds) == 0 {
		return fmt.Errorf("fpm: recipe: no kinds")
	}
	r.byKind = [nKinds]*RecipeKind{}
	for i := range r.Kinds {
		k := &r.Kinds[i]
		ki := slices.Index(recipeKinds[:], k.Kind)
		if ki < 0 {
			return fmt.Errorf("fpm: recipe: kind %q: want prefill, decode or mixed", k.Kind)
		}
		if r.byKind[ki] != nil {
			return fmt.Errorf("fpm: recipe: kind %s given twice", k.Kind)
		}
		if err := k.Validate(); err != nil {
			return fmt.Errorf("fpm: recipe: kind %s: %w", k.Kind, err)
		}
		k.cacheLevel(r.Level)
		r.byKind[ki] = k
	}
	if m := r.byKind[kindMixed]; m != nil && m.Compose != nil {
		if m.Compose.Rule != ComposePrefillMarginalDecode {
			return fmt.Errorf("fpm: recipe: mixed compose rule %q: want %q", m.Compose.Rule, ComposePrefillMarginalDecode)
		}
		if r.byKind[kindPrefill] == nil || r.byKind[kindDecode] == nil {
			return fmt.Errorf("fpm: recipe: mixed steps are composed but the recipe lacks a prefill or a decode kind")
		}
		if !(m.Compose.KVFloorPerRequest >= 0) {
			return fmt.Errorf("fpm: recipe: mixed kv_floor_per_request %v: want >= 0", m.Compose.KVFloorPerRequest)
		}
	}
	return nil
}

// Validate checks one kind and builds its models (Recipe.Validate calls
// it for every kind).
func (k *RecipeKind) Validate() error {
	if k.Compose != nil && (k.Table != nil || len(k.Terms) > 0 || k.Regimes != nil) {
		return fmt.Errorf("a composed kind has no table or terms of its own")
	}
	if k.Compose == nil && k.Table == nil && len(k.Terms) == 0 && k.Regimes == nil {
		return fmt.Errorf("neither a table, a linear form nor a composition")
	}
	if k.Regimes != nil && len(k.Terms) > 0 {
		return fmt.Errorf("both terms and regimes: a kind has one linear form or regimes of them")
	}
	if k.Table != nil {
		if err := k.Table.Validate(); err != nil {
			return err
		}
	}
	k.lin = nil
	if len(k.Terms) > 0 {
		m, err := linearOf(k.Terms, k.Coefficients, k.CoefCov, nil)
		if err != nil {
			return err
		}
		k.lin = m
	}
	if k.Regimes != nil {
		if err := k.Regimes.validate(); err != nil {
			return err
		}
	}
	if k.Extent != nil {
		if err := k.Extent.validate(); err != nil {
			return fmt.Errorf("extent: %w", err)
		}
	}
	for key, q := range k.Residuals {
		if key != RegionAll && !slices.Contains(regionIdx[:], key) {
			return fmt.Errorf("residuals for unknown region %q", key)
		}
		if q == nil || q.Scale != ScaleRelative || len(q.P) == 0 || len(q.P) != len(q.Values) {
			return fmt.Errorf("residuals %s: want relative quantiles with as many values as probabilities", key)
		}
	}
	for i, name := range regionIdx {
		k.res[i] = k.Residuals[name]
		if k.res[i] == nil {
			k.res[i] = k.Residuals[RegionAll]
		}
	}
	return nil
}

// Kind returns the model of a kind (nil when the recipe has none).
func (r *Recipe) Kind(kind string) *RecipeKind {
	if i := slices.Index(recipeKinds[:], kind); i >= 0 {
		return r.byKind[i]
	}
	return nil
}

// Linear returns the linear form that prices f outside the table: the
// kind's one form, or the piece of its regimes f falls in (nil without a
// linear form).
func (k *RecipeKind) Linear(f Features) *Linear { return k.linFor(&f) }

// Linears returns the kind's linear forms: its one form, or the pieces
// of its regimes in order (none without a linear form).
func (k *RecipeKind) Linears() []*Linear {
	if g := k.Regimes; g != nil {
		return slices.Clone(g.lins)
	}
	if k.lin != nil {
		return []*Linear{k.lin}
	}
	return nil
}

func (k *RecipeKind) linFor(f *Features) *Linear {
	if g := k.Regimes; g != nil {
		return g.lins[g.Piece(*f)]
	}
	return k.lin
}

// Estimate prices a step with this kind's table or linear form alone
// (not a composition): the prediction, its standard error and the region.
func (k *RecipeKind) Estimate(f Features) (ns, se float64, region string) {
	e := k.estimate(&f)
	return e.ns, e.se, regionIdx[e.region]
}

func (k *RecipeKind) estimate(f *Features) estimate {
	if k.Table != nil {
		if ns, se, ok := k.Table.Lookup(*f); ok {
			return estimate{ns, se, rInterp}
		}
	}
	lin := k.linFor(f)
	if lin == nil {
		return estimate{region: rUnpriced}
	}
	ns, se := lin.predictSE(*f)
	reg := rFitted
	if k.Table != nil {
		reg = rExtrap
	}
	return estimate{math.Max(ns, 0), se, reg}
}

// interval is the interval of estimate e of step f, widened by f's
// distance outside the kind's measured design (Extent.Widen).
func (k *RecipeKind) interval(e estimate, f *Features, coverage float64) (lo, hi float64) {
	lo, hi = k.intervalAt(e.region, e.ns, e.se, coverage)
	if k.Extent != nil {
		lo, hi = k.Extent.Widen(*f, e.ns, lo, hi)
	}
	return lo, hi
}

// intervalAt is the interval of a prediction mid with standard error se
// from the residuals of region.
func (k *RecipeKind) intervalAt(region int, mid, se, coverage float64) (lo, hi float64) {
	if coverage == k.at.level && coverage > 0 {
		return spread(mid, se, k.at.z, k.at.lo[region], k.at.hi[region])
	}
	return k.res[region].IntervalSE(mid, se, coverage)
}

// composeParts splits a mixed step into its prefill pass (the decode
// tokens riding on it), and its decode work at its contexts and at the
// floor context.
func composeParts(f *Features, floor float64) (pre, dec, base Features) {
	pre = *f
	pre.PrefillTokens += f.DecodeRequests
	pre.DecodeRequests, pre.DecodeKVTokens, pre.DecodeMaxKVTokens, pre.DecodeKVVar, pre.PaddedBatch = 0, 0, 0, 0, 0
	dec = Features{DecodeRequests: f.DecodeRequests, DecodeKVTokens: f.DecodeKVTokens, DecodeMaxKVTokens: f.DecodeMaxKVTokens,
		DecodeKVVar: f.DecodeKVVar, PaddedBatch: f.PaddedBatch}
	base = Features{DecodeRequests: f.DecodeRequests, DecodeKVTokens: f.DecodeRequests * floor, DecodeMaxKVTokens: floor, PaddedBatch: f.PaddedBatch}
	return pre, dec, base
}

// walk is what the decode rows of mixed step f cost walking their KV as
// a prefill chunk's programs walk theirs (Compose.DecodeWalk): the prefill
// kind's cost per token of context on the linear form that prices the
// step's prefill pass pre, times the longest decode context beyond the
// floor (the mean where the longest is not recorded), and its standard
// error; 0 where that form does not price a context.
func (k *RecipeKind) walk(pre, f *Features, floor float64) (ns, se float64) {
	lin := k.linFor(pre)
	if lin == nil {
		return 0, 0
	}
	j := slices.Index(lin.Terms, TermPrefillKVTokens)
	if j < 0 {
		return 0, 0
	}
	longest := f.DecodeMaxKVTokens
	if mean := f.DecodeKVTokens / f.DecodeRequests; !(longest >= mean) {
		longest = mean
	}
	reach := math.Max(0, longest-floor)
	if len(lin.CoefCov) == len(lin.Terms) {
		se = math.Sqrt(math.Max(0, lin.CoefCov[j][j])) * reach
	}
	return lin.Coef[j] * reach, se
}

// composition is a mixed step's parts: the prefill pass, the decode form
// at the step's decode work and at the floor, and the marginal decode
// cost (the bracket or the walk, whichever is larger: walked) with its
// standard error and the region of the part that set it.
type composition struct {
	pre, dec, base Features
	ep, ed, eb     estimate
	marg           estimate
	walked         bool
}

func (r *Recipe) composed(m *RecipeKind, f *Features) composition {
	c := composition{}
	floor := m.Compose.KVFloorPerRequest
	c.pre, c.dec, c.base = composeParts(f, floor)
	p, d := r.byKind[kindPrefill], r.byKind[kindDecode]
	c.ep, c.ed, c.eb = p.estimate(&c.pre), d.estimate(&c.dec), d.estimate(&c.base)
	c.marg = estimate{math.Max(0, c.ed.ns-c.eb.ns), c.ed.se, c.ed.region}
	if m.Compose.DecodeWalk {
		if w, se := p.walk(&c.pre, f, floor); w > c.marg.ns {
			c.marg, c.walked = estimate{w, se, c.ep.region}, true
		}
	}
	return c
}

// PredictNs implements FPM.
func (r *Recipe) PredictNs(f Features) float64 {
	ki := kindOf(&f)
	k := r.byKind[ki]
	switch {
	case k != nil && k.Compose == nil:
		return k.estimate(&f).ns
	case ki == kindMixed && k != nil:
		c := r.composed(k, &f)
		return c.ep.ns + c.marg.ns
	}
	return 0
}

// PredictIntervalNs implements IntervalFPM.
func (r *Recipe) PredictIntervalNs(f Features, coverage float64) (mid, lo, hi float64) {
	p := r.Price(f, coverage)
	return p.Ns, p.Lo, p.Hi
}

// Price predicts a step with an interval of the given coverage and says
// which kind model priced it and how.
func (r *Recipe) Price(f Features, coverage float64) Pricing {
	ki := kindOf(&f)
	k := r.byKind[ki]
	switch {
	case k != nil && k.Compose == nil:
		e := k.estimate(&f)
		lo, hi := k.interval(e, &f, coverage)
		return Pricing{Ns: e.ns, Lo: lo, Hi: hi, Kind: k.Kind, Region: regionIdx[e.region]}
	case ki == kindMixed && k != nil:
		return r.compose(k, &f, coverage)
	}
	return Pricing{Kind: recipeKinds[ki], Region: RegionUnpriced}
}

// compose prices a mixed step from prefill and decode. Its interval uses
// the mixed kind's own residuals when it has them for the region (a
// calibration on measured mixed steps); otherwise the prefill part's and
// the marginal decode part's deviations add in quadrature, the marginal
// part's from the residuals of the kind that set it.
func (r *Recipe) compose(m *RecipeKind, f *Features, coverage float64) Pricing {
	c := r.composed(m, f)
	p, d := r.byKind[kindPrefill], r.byKind[kindDecode]
	reg := max(c.ep.region, c.ed.region, c.eb.region) // a composed step leaves the hull if any part does
	out := Pricing{Ns: c.ep.ns + c.marg.ns, Kind: m.Kind, Region: regionIdx[reg], Composed: true}
	if reg == rUnpriced {
		out.Ns, out.Lo, out.Hi = 0, 0, 0
		return out
	}
	se := math.Hypot(c.ep.se, c.marg.se)
	if m.res[reg] != nil {
		out.Lo, out.Hi = m.intervalAt(reg, out.Ns, se, coverage)
		return out
	}
	plo, phi := p.interval(c.ep, &c.pre, coverage)
	part, at := d, &c.dec
	if c.walked {
		part, at = p, &c.pre
	}
	mlo, mhi := part.intervalAt(c.marg.region, c.marg.ns, c.marg.se, coverage)
	if part.Extent != nil {
		mlo, mhi = part.Extent.Widen(*at, c.marg.ns, mlo, mhi)
	}
	out.Lo = math.Max(0, out.Ns-math.Hypot(c.ep.ns-plo, c.marg.ns-mlo))
	out.Hi = out.Ns + math.Hypot(phi-c.ep.ns, mhi-c.marg.ns)
	return out
}
