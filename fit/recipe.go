package fit

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
)

// KindSpec is what the recipe fits for one step kind: the coordinates its
// benchmark grid is laid over (fpm.Coord names, the table's axes) and
// the terms of its linear form (fpm.Term names). Both are data: a new
// feature becomes a new coordinate or term name here and in the artifact.
type KindSpec struct {
	Kind   string   `json:"kind" yaml:"kind"`
	Coords []string `json:"coords,omitempty" yaml:"coords"`
	Terms  []string `json:"terms" yaml:"terms"`
	// Regimes names a coordinate along which the linear form may split
	// into pieces, each fitted on its own rows, where held-out error on
	// the kind's rows says the data has regimes (regimeBounds); "" for
	// one form.
	Regimes string `json:"regimes,omitempty" yaml:"regimes"`
	// Bounds are regime bounds along Regimes known before the search,
	// where the engine changes how it runs a step (a CUDA graph up to its
	// largest captured size, eagerly above it): kept whatever the
	// held-out error unless a piece they leave has too few rows to fit,
	// and the search adds to them.
	Bounds []float64 `json:"bounds,omitempty" yaml:"bounds"`
	// Relative fits the linear form in relative error (rows weighted
	// 1/y²), as the held-out error that picks the regimes is measured.
	Relative bool `json:"relative,omitempty" yaml:"relative"`
}

// DefaultKindSpecs are the recipe's kinds:
//
//   - prefill: a table over (prefill tokens, prefill requests, the context
//     the chunks read) and the prefill terms, split into regimes of
//     scheduled tokens where the grid's held-out error says so (from a
//     bound at the largest CUDA graph: a small prefill replays a graph,
//     a larger one runs eagerly), fitted in relative error;
//   - decode: a table over (batch, context per request) of the uniform
//     points (kv_max_ratio 1: a ragged batch is outside its hull), and
//     AttnDecodeTerms split into regimes of the CUDA graph's batch
//     (padded_batch: a batch between two graph sizes runs the upper
//     size's kernels, its GEMMs and the attention's split) where the
//     grid's held-out error says so, fitted in relative error;
//   - mixed: MixedTerms split into regimes of scheduled tokens where the
//     grid's held-out error says so, fitted in relative error, when mixed
//     steps were measured (no table: mixed points are not on one grid) and
//     they price them better than the composition from prefill and decode
//     does; else composed.
var DefaultKindSpecs = []KindSpec{
	{Kind: datasets.KindPrefill, Coords: []string{fpm.TermPrefillTokens, fpm.TermPrefillRequests, fpm.TermPrefillKVTokens},
		Terms:   []string{fpm.TermConst, fpm.TermPrefillTokens, fpm.TermPrefillKVTokens, fpm.TermPrefillAttn, fpm.TermPrefillRequests},
		Regimes: fpm.CoordScheduledTokens, Relative: true},
	{Kind: datasets.KindDecode, Coords: []string{fpm.TermDecodeRequests, fpm.CoordKVPerRequest, fpm.CoordKVMaxRatio + "=1"},
		Terms: AttnDecodeTerms, Regimes: fpm.TermPaddedBatch, Relative: true},
	{Kind: datasets.KindMixed, Terms: MixedTerms, Regimes: fpm.CoordScheduledTokens, Relative: true},
}

// MixedTerms price a step whose prefill chunks ride with decodes: a fixed
// cost, the chunks' tokens, their causal attention and count, and the
// decodes as RaggedDecodeTerms price them (their count, the KV they read,
// the longest context and the batch padded to it). The regimes of
// scheduled tokens are where the engine changes how it runs the step: a
// CUDA graph up to the largest captured size, eagerly above it.
var MixedTerms = []string{fpm.TermConst, fpm.TermPrefillTokens, fpm.TermPrefillAttn, fpm.TermPrefillRequests,
	fpm.TermDecodeRequests, fpm.TermDecodeKVTokens, fpm.TermDecodeMaxKV, fpm.TermDecodeBatchMaxKV}

// RaggedDecodeTerms price a decode step whose requests read different
// contexts: a fixed cost, the CUDA-graph batch the step ran, the KV tokens
// read, the longest context and the batch padded to it (an attention
// kernel with a program per request waits for the longest one). On a
// uniform grid the last equals decode_kv_tokens and is dropped.
var RaggedDecodeTerms = []string{fpm.TermConst, fpm.TermPaddedBatch, fpm.TermDecodeKVTokens, fpm.TermDecodeMaxKV, fpm.TermDecodeBatchMaxKV}

// AttnDecodeTerms price a decode step from its mechanisms: a fixed cost
// (launches, weight streaming), the GEMM work of the CUDA-graph batch the
// step ran, and the attention's KV walk (fpm.TermDecodeAttnKV, written
// with the data's wave, KV heads and kernel rule: fpm.DecodeWalk), whose
// coefficient a uniform grid identifies and which prices a ragged batch's
// long requests by the kernel's launch. The ragged terms after it refine
// that where ragged points were measured; without them, decode_kv_tokens
// and decode_batch_max_kv are left out (uniformDecodeTerms).
var AttnDecodeTerms = []string{fpm.TermConst, fpm.TermPaddedBatch, fpm.TermDecodeAttnKV, fpm.TermDecodeKVTokens, fpm.TermDecodeMaxKV, fpm.TermDecodeBatchMaxKV}

// ExpertsDecodeTerms are AttnDecodeTerms with the experts a mixture of
// experts' tokens reach (fpm.TermExpertsReached, written with the
// manifests' routing; left out for a dense model), which price the expert
// GEMMs' weight reads: concave in the batch, where padded_batch is linear.
// Not the default: on the H200 captures it prices one generation's MoE
// traffic better and the next one's worse (docs/fitting.md#mixtures-of-experts);
// a recipe takes it through RecipeOptions.Kinds (ExpertsKindSpecs).
var ExpertsDecodeTerms = []string{fpm.TermConst, fpm.TermPaddedBatch, fpm.TermExpertsReached, fpm.TermDecodeAttnKV, fpm.TermDecodeKVTokens, fpm.TermDecodeMaxKV, fpm.TermDecodeBatchMaxKV}

// ExpertsKindSpecs are DefaultKindSpecs with the decode kind's terms
// ExpertsDecodeTerms.
func ExpertsKindSpecs() []KindSpec {
	kinds := slices.Clone(DefaultKindSpecs)
	for i := range kinds {
		if kinds[i].Kind == datasets.KindDecode {
			kinds[i].Terms = ExpertsDecodeTerms
		}
	}
	return kinds
}

// RecipeOptions configures FitRecipe. Zero values take the defaults.
type RecipeOptions struct {
	Kinds  []KindSpec // DefaultKindSpecs
	Method string     // MethodNNLS
	// Bootstrap replicates behind the coefficient intervals and
	// covariance (0: none).
	Bootstrap int
	Seed      uint64
	SnapRel   float64 // 0.02, as BuildGrid
	Level     float64 // nominal interval coverage, 0.9
	// MinRows: mixed steps get a model of their own from this many rows
	// (else they are composed), and a region gets residual quantiles of
	// its own from this many residuals (default 20).
	MinRows int
	// Folds of the cross-validation that gives the residuals of rows
	// outside a table (default 5).
	Folds int
	// SkipResiduals leaves the held-out residuals out (the refits of a
	// cross-validation need only the point model).
	SkipResiduals bool
}

func (o *RecipeOptions) defaults() {
	if o.Kinds == nil {
		o.Kinds = DefaultKindSpecs
	}
	if o.Method == "" {
		o.Method = MethodNNLS
	}
	if o.SnapRel <= 0 {
		o.SnapRel = 0.02
	}
	if o.Level <= 0 {
		o.Level = 0.9
	}
	if o.MinRows <= 0 {
		o.MinRows = 20
	}
	if o.Folds < 2 {
		o.Folds = 5
	}
}

// Ways a recipe kind is priced (KindReport.PricedBy).
const (
	PricedTableLinear = "table+linear" // interpolated inside the hull, linear outside
	PricedLinear      = "linear"       // no grid: the linear form everywhere
	PricedTable       = "table"        // the linear form could not be fitted: unpriced outside the hull
	PricedComposed    = "composed"     // prefill + marginal decode
	PricedNone        = "unpriced"
)

// KindReport says what the recipe fitted for one kind.
type KindReport struct {
	Kind     string      `json:"kind"`
	Rows     int         `json:"rows"`
	PricedBy string      `json:"priced_by"`
	Table    *TableStats `json:"table,omitempty"`
	Terms    []string    `json:"terms,omitempty"`
	// Coefficients of the linear form, with bootstrap intervals.
	Coefficients []fpm.Coefficient `json:"coefficients,omitempty"`
	Dropped      []DroppedTerm     `json:"dropped_terms,omitempty"`
	// Identified says, for a setting of a term's mechanism, whether the
	// rows identified it or what was assumed, and which points would
	// identify it.
	Identified []string `json:"identified,omitempty"`
	// Regimes are the pieces of a linear form split into regimes (then
	// Terms and Coefficients are empty).
	Regimes []RegimeReport `json:"regimes,omitempty"`
	// Residuals summarises each region's residual quantiles.
	Residuals []ResidualSummary `json:"residuals,omitempty"`
	Note      string            `json:"note,omitempty"`
}

// ResidualSummary is one region's residual quantiles at the recipe's
// level: the relative interval they give, in percent of the prediction.
type ResidualSummary struct {
	Region string  `json:"region"`
	N      int     `json:"n"`
	Source string  `json:"source"`
	LoPct  float64 `json:"lo_pct"`
	HiPct  float64 `json:"hi_pct"`
}

// RecipeResult is a fitted recipe and what the fit did per kind.
type RecipeResult struct {
	Model    *fpm.Recipe
	Kinds    []KindReport
	Warnings []string
}

// Residual sources.
const (
	SourceGridLines   = "held-out grid lines"
	SourceCV          = "cross-validation"
	SourceCalibration = "calibration"
	// SourceMixedPoints: a composed mixed kind's residuals on the measured
	// mixed points, which the composition never saw.
	SourceMixedPoints = "measured mixed points"
)

// FitRecipe fits the default recipe (fpm.Recipe): per kind of
// opt.Kinds with rows in d, a table over the kind's coordinates when its
// benchmark rows (Data.Benchmark; all its rows when none is marked) form a
// grid (BuildTable), and the linear form over its terms (NNLS by default,
// degenerate terms dropped, bootstrap covariance). Mixed steps are composed
// from prefill and decode when fewer than MinRows were measured, or when
// the composition prices the measured ones better than their own linear
// form does out of fold (composeIfBetter).
//
// The residual quantiles behind the intervals are held out: for a kind
// with a table, each grid line (every node of every axis in turn) is left
// out and its rows predicted by the recipe refitted without it, so that
// an interior line measures interpolation error across a cell twice as
// wide (conservative) and an edge line measures extrapolation by the
// linear form; the kind's other rows, and kinds without a table, are
// cross-validated in Folds folds. Residuals are relative, (actual −
// predicted)/predicted: step times span two orders of magnitude and their
// error grows with them (docs/fitting.md has the figures).
//
// A kind whose linear form cannot be fitted (too few rows, collinear
// terms) and has no table is left out with a warning: its steps are
// unpriced.
func FitRecipe(d *Data, opt RecipeOptions) (*RecipeResult, error) {
	opt.defaults()
	if d.Len() == 0 {
		return nil, dataErr(ErrEmptySelection, "no rows to fit a recipe to")
	}
	rows := map[string][]int{}
	for i := range d.Y {
		rows[d.Kind(i)] = append(rows[d.Kind(i)], i)
	}
	var notes []string
	opt.Kinds, notes = resolveExperts(opt.Kinds, d)
	ragged := raggedRows(d, rows[datasets.KindDecode], opt.SnapRel)
	perSM, perSMNote := attnPerSM(d, rows[datasets.KindDecode], ragged, opt)
	kinds, unsplit := resolveAttnKV(opt.Kinds, d, perSM)
	kinds, raggedDrops := uniformDecodeTerms(kinds, unsplit, ragged, opt.MinRows)
	opt.Kinds = kinds
	r := &fpm.Recipe{Level: opt.Level}
	res := &RecipeResult{Model: r, Warnings: notes}
	var compose *KindSpec
	var firstErr error
	seen := map[string]bool{}
	for _, spec := range opt.Kinds {
		if !slices.Contains([]string{datasets.KindPrefill, datasets.KindDecode, datasets.KindMixed}, spec.Kind) || seen[spec.Kind] {
			return nil, fmt.Errorf("fit: recipe kind %q: want prefill, decode and mixed, once each", spec.Kind)
		}
		seen[spec.Kind] = true
		if spec.Regimes == fpm.CoordScheduledTokens && d.GraphTokens > 0 && !slices.Contains(spec.Bounds, float64(d.GraphTokens)) {
			spec.Bounds = append(slices.Clone(spec.Bounds), float64(d.GraphTokens))
		}
		idx := rows[spec.Kind]
		if spec.Kind == datasets.KindMixed && len(idx) < opt.MinRows {
			compose = &spec
			continue
		}
		if len(idx) == 0 {
			continue
		}
		k, rep, err := fitKind(d, idx, spec, opt, opt.Bootstrap)
		if err != nil {
			var de *DataError
			if !errors.As(err, &de) {
				return nil, err
			}
			firstErr = cmp.Or(firstErr, err)
			rep.PricedBy, rep.Note = PricedNone, err.Error()
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s steps are unpriced: %v", spec.Kind, err))
			res.Kinds = append(res.Kinds, *rep)
			continue
		}
		if slices.Contains(unsplit, spec.Kind) {
			rep.Dropped = append([]DroppedTerm{{fpm.TermDecodeAttnKV, noKVSplit}}, rep.Dropped...)
		} else if spec.Kind == datasets.KindDecode && perSMNote != "" {
			rep.Identified = append(rep.Identified, perSMNote, kernelNote(d))
			rep.Dropped = append(raggedDrops, rep.Dropped...)
		}
		if !opt.SkipResiduals {
			if err := heldOutResiduals(d, idx, spec, opt, k, rep); err != nil {
				return nil, err
			}
			k.Extent = designExtent(d, idx, k.Table)
		}
		r.Kinds = append(r.Kinds, *k)
		res.Kinds = append(res.Kinds, *rep)
	}
	if compose == nil && hasKind(r, datasets.KindMixed) && hasKind(r, datasets.KindPrefill) && hasKind(r, datasets.KindDecode) {
		if err := res.composeIfBetter(d, rows, opt); err != nil {
			return nil, err
		}
	}
	if compose != nil {
		rep := KindReport{Kind: datasets.KindMixed, Rows: len(rows[datasets.KindMixed]), PricedBy: PricedNone,
			Note: "no prefill or no decode model to compose mixed steps from"}
		if hasKind(r, datasets.KindPrefill) && hasKind(r, datasets.KindDecode) {
			rep.PricedBy = PricedComposed
			rep.Note = fmt.Sprintf("prefill + marginal decode: %d measured mixed rows, a model of their own needs %d", rep.Rows, opt.MinRows)
			c, walk := newCompose(d, rows, r)
			rep.Identified = []string{walk}
			r.Kinds = append(r.Kinds, fpm.RecipeKind{Kind: datasets.KindMixed, Rows: rep.Rows, Compose: c})
		}
		res.Kinds = append(res.Kinds, rep)
	}
	if len(r.Kinds) == 0 {
		if firstErr != nil {
			return nil, firstErr
		}
		return nil, dataErr(ErrEmptySelection, "no rows of a kind the recipe fits")
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("fit: recipe: %w", err)
	}
	res.summarizeResiduals()
	return res, nil
}

// composeIfBetter prices the measured mixed rows by composition from the
// recipe's prefill and decode kinds, which never saw them, and keeps the
// composition instead of the mixed kind's own linear form when its error
// on them is below the linear form's out of fold (opt.Folds folds): mixed
// points measured with a cost that traffic's mixed steps do not pay (a
// launch-bound eager pass, what the step before them left behind) fit a
// form of their own that carries it. The composed kind's residuals are
// then its residuals on those rows (SourceMixedPoints).
func (res *RecipeResult) composeIfBetter(d *Data, rows map[string][]int, opt RecipeOptions) error {
	idx := rows[datasets.KindMixed]
	spec := opt.Kinds[slices.IndexFunc(opt.Kinds, func(k KindSpec) bool { return k.Kind == datasets.KindMixed })]
	fold := Folds(len(idx), opt.Folds, opt.Seed)
	var own float64
	for f := 0; f < opt.Folds; f++ {
		var train, test []int
		for j, i := range idx {
			if fold[j] == f {
				test = append(test, i)
			} else {
				train = append(train, i)
			}
		}
		if len(test) == 0 {
			continue
		}
		k, _, err := fitKind(d, train, spec, opt, 0)
		if err != nil {
			return nil // the linear form needs all its rows: keep it
		}
		for _, i := range test {
			ns, _, _ := k.Estimate(d.Features[i])
			own += ape(d.Y[i], ns) / float64(len(idx))
		}
	}
	r := res.Model
	mi := slices.IndexFunc(r.Kinds, func(k fpm.RecipeKind) bool { return k.Kind == datasets.KindMixed })
	linear := r.Kinds[mi]
	c, walk := newCompose(d, rows, r)
	r.Kinds[mi] = fpm.RecipeKind{Kind: datasets.KindMixed, Rows: len(idx), Compose: c}
	if err := r.Validate(); err != nil {
		return fmt.Errorf("fit: recipe: %w", err)
	}
	var composed float64
	for _, i := range idx {
		composed += ape(d.Y[i], r.PredictNs(d.Features[i])) / float64(len(idx))
	}
	ri := slices.IndexFunc(res.Kinds, func(k KindReport) bool { return k.Kind == datasets.KindMixed })
	if !(composed < own) {
		r.Kinds[mi] = linear
		res.Kinds[ri].Note = fmt.Sprintf("its own linear form: %.1f%% error out of fold on the %d measured mixed rows, composition from prefill and decode %.1f%%", own, len(idx), composed)
		return r.Validate()
	}
	res.Kinds[ri] = KindReport{Kind: datasets.KindMixed, Rows: len(idx), PricedBy: PricedComposed, Identified: []string{walk},
		Note: fmt.Sprintf("prefill + marginal decode: %.1f%% error on the %d measured mixed rows, which it never saw, against %.1f%% out of fold for their own linear form", composed, len(idx), own)}
	if opt.SkipResiduals {
		return nil
	}
	_, err := CalibrateRecipe(r, d.Subset(idx), opt.MinRows, SourceMixedPoints)
	return err
}

// newCompose is the composition of mixed steps from the recipe's prefill
// and decode kinds (r has both, validated), and what identified the decode rows' KV walk
// (fpm.Compose.DecodeWalk): the prefill kind's cost per token of the
// context its chunks read, priced where its linear form (a piece of it)
// has a positive prefill_kv_tokens coefficient, which prefill points at a
// context identify.
func newCompose(d *Data, rows map[string][]int, r *fpm.Recipe) (*fpm.Compose, string) {
	c := &fpm.Compose{Rule: fpm.ComposePrefillMarginalDecode, KVFloorPerRequest: kvFloor(d, rows[datasets.KindDecode])}
	var at []int
	for _, i := range rows[datasets.KindPrefill] {
		if d.Features[i].PrefillKVTokens > 0 {
			at = append(at, i)
		}
	}
	var rates []string
	pk := &r.Kinds[slices.IndexFunc(r.Kinds, func(k fpm.RecipeKind) bool { return k.Kind == datasets.KindPrefill })]
	for i, lin := range pk.Linears() {
		if j := slices.Index(lin.Terms, fpm.TermPrefillKVTokens); j >= 0 && lin.Coef[j] > 0 {
			c.DecodeWalk = true
			rate := fmt.Sprintf("%.3g µs", lin.Coef[j]/1e3)
			if pk.Regimes != nil {
				rate += " (" + pk.Regimes.Range(i) + ")"
			}
			rates = append(rates, rate)
		}
	}
	if !c.DecodeWalk {
		return c, fmt.Sprintf("decode rows' KV walk: not priced (%d prefill rows read a context, and the prefill form prices none): "+
			"their attention is the decode form's marginal cost alone; prefill points of a chunk at a context (mixed points with 0 decodes "+
			"at a prefill context) would identify how fast the kernel's programs walk the KV, which a mixed step's decode rows pay at their longest context", len(at))
	}
	return c, fmt.Sprintf("decode rows' KV walk: %s per token of their longest context (the prefill form's %s, identified by %d prefill rows at a context)",
		strings.Join(rates, ", "), fpm.TermPrefillKVTokens, len(at))
}

// noKVSplit is why a kind's decode attention term was left out.
const noKVSplit = "the datasets' manifests do not give the GPU's SM count (hardware.gpu_name, in the catalogue) and the model's kv_heads, " +
	"or they disagree: its decode attention is priced by decode_kv_tokens, and ragged batches by the terms the rows identify"

// AttnPerSMCandidates are the attention programs per SM (of the
// catalogue's KV tile, attnWave) the recipe tries where ragged decode
// points identify them (attnPerSM).
var AttnPerSMCandidates = []int{1, 2, 3, 4, 6, 8}

// raggedRows counts the decode rows idx of d whose longest context is
// above their mean by more than the snapping tolerance (kv_max_ratio).
func raggedRows(d *Data, idx []int, snap float64) int {
	ratio, _ := fpm.Coord(fpm.CoordKVMaxRatio)
	n := 0
	for _, i := range idx {
		if ratio(d.Features[i]) > 1+snap {
			n++
		}
	}
	return n
}

// attnPerSM is how many decode attention programs an SM runs at once (of
// the catalogue's KV tile: attnWave writes the wave of fpm.DecodeWalk),
// and what says so. A uniform grid cannot tell (every request of a batch
// is as long as the longest), so with fewer than opt.MinRows ragged
// decode rows it is the hardware catalogue's figure (Data.AttnPerSM, 1
// where the catalogue has none); with them, the candidate whose decode
// form errs least on them and the uniform rows out of fold.
func attnPerSM(d *Data, idx []int, ragged int, opt RecipeOptions) (int, string) {
	di := slices.IndexFunc(opt.Kinds, func(k KindSpec) bool { return k.Kind == datasets.KindDecode })
	if d.SMs <= 0 || d.KVHeads <= 0 || di < 0 || !slices.Contains(opt.Kinds[di].Terms, fpm.TermDecodeAttnKV) {
		return 0, ""
	}
	def := max(d.AttnPerSM, 1)
	if ragged < opt.MinRows {
		return def, fmt.Sprintf("%s: %d attention programs per SM assumed (%s), not identified: %d ragged decode rows, and a uniform grid cannot tell; "+
			"%d or more ragged decode points (requests of one batch at different contexts, at batch sizes on both sides of a wave of %d programs / %d KV heads) would identify it",
			fpm.TermDecodeAttnKV, def, perSMSource(d), ragged, opt.MinRows, attnWave(d, def), d.KVHeads)
	}
	spec := opt.Kinds[di]
	sub := opt
	sub.SkipResiduals = true
	fold := Folds(len(idx), opt.Folds, opt.Seed)
	best, bestErr := def, math.Inf(1)
	for _, c := range AttnPerSMCandidates {
		ks, _ := resolveAttnKV([]KindSpec{spec}, d, c)
		var e float64
		for f := 0; f < opt.Folds && !math.IsInf(e, 1); f++ {
			var train, test []int
			for j, i := range idx {
				if fold[j] == f {
					test = append(test, i)
				} else {
					train = append(train, i)
				}
			}
			k, _, err := fitKind(d, train, ks[0], sub, 0)
			if err != nil {
				e = math.Inf(1)
				break
			}
			for _, i := range test {
				ns, _, _ := k.Estimate(d.Features[i])
				e += ape(d.Y[i], ns) / float64(len(idx))
			}
		}
		if e < bestErr {
			best, bestErr = c, e
		}
	}
	return best, fmt.Sprintf("%s: %d attention programs per SM (a wave of %d), identified by %d ragged decode rows (%.2f%% error out of fold; the catalogue's figure %d)",
		fpm.TermDecodeAttnKV, best, attnWave(d, best), ragged, bestErr, def)
}

// kernelNote says which split-KV launch rule the decode attention term
// prices the walk with, and where it was read.
func kernelNote(d *Data) string {
	k := d.Kernel
	if k == (fpm.DecodeKernel{}) {
		return fmt.Sprintf("%s: the decode kernel's split-KV rule is not known (the manifests' source.detail record no %s, %s and %s): no split priced, the walk token by token",
			fpm.TermDecodeAttnKV, datasets.DetailDecodeKVTileTokens, datasets.DetailDecodeSplitPrograms, datasets.DetailDecodeSplitMax)
	}
	return fmt.Sprintf("%s: the decode kernel's split-KV rule: %d-token KV tiles, a batch's walk split until it has %d programs, at most %d ways (%s)",
		fpm.TermDecodeAttnKV, k.TileTokens, k.SplitPrograms, k.SplitMax, d.KernelSource)
}

// uniformDecodeTerms leaves out of the decode kind the terms that price
// how a ragged batch departs from the attention term (decode_kv_tokens:
// its mean; decode_batch_max_kv: every request as long as the longest)
// where fewer than minRows ragged decode rows identify them and the kind
// has the attention term (not in unsplit): a uniform grid tells them from
// it only at its small batches and short contexts' last tiles, which say
// nothing of a ragged batch. It returns the kinds and the terms it left out.
func uniformDecodeTerms(kinds []KindSpec, unsplit []string, ragged, minRows int) ([]KindSpec, []DroppedTerm) {
	if ragged >= minRows || slices.Contains(unsplit, datasets.KindDecode) {
		return kinds, nil
	}
	out := slices.Clone(kinds)
	var drops []DroppedTerm
	for i, k := range out {
		if k.Kind != datasets.KindDecode || !slices.ContainsFunc(k.Terms, func(t string) bool { return strings.HasPrefix(t, fpm.TermDecodeAttnKV+"(") }) {
			continue
		}
		out[i].Terms = slices.DeleteFunc(slices.Clone(k.Terms), func(t string) bool {
			if t != fpm.TermDecodeKVTokens && t != fpm.TermDecodeBatchMaxKV {
				return false
			}
			drops = append(drops, DroppedTerm{t, fmt.Sprintf("how a ragged batch's cost departs from %s: %d ragged decode rows; %d or more ragged decode points "+
				"(requests of one batch at different contexts) would identify it", fpm.TermDecodeAttnKV, ragged, minRows)})
			return true
		})
	}
	return out, drops
}

// perSMSource says where the assumed programs per SM come from.
func perSMSource(d *Data) string {
	switch t := d.Kernel.TileTokens; {
	case d.AttnPerSM > 0 && d.AttnTile > 0 && t == d.AttnTile:
		return fmt.Sprintf("the hardware catalogue's attn_programs_per_sm, measured with the kernel's %d-token KV tiles", t)
	case d.AttnPerSM > 0 && d.AttnTile > 0 && t > 0:
		return fmt.Sprintf("the hardware catalogue's attn_programs_per_sm, of %d-token KV tiles: %.3g of the kernel's %d-token ones keep as many KV tokens in flight",
			d.AttnTile, float64(d.AttnPerSM*d.AttnTile)/float64(t), t)
	}
	if d.AttnPerSM > 0 {
		return "the hardware catalogue's attn_programs_per_sm"
	}
	return "one per SM, as the measured-operations prior prices the split; the hardware catalogue has no attn_programs_per_sm for this GPU"
}

// attnWave is the decode attention term's wave at perSM programs per SM
// of the catalogue's tile (Data.AttnTile): SMs × perSM, scaled by that
// tile over the kernel's where both are known (a program walking longer
// tiles keeps more KV in flight, so fewer of them saturate the memory).
func attnWave(d *Data, perSM int) int {
	w := float64(d.SMs * perSM)
	if d.AttnTile > 0 && d.Kernel.TileTokens > 0 {
		w *= float64(d.AttnTile) / float64(d.Kernel.TileTokens)
	}
	return max(1, int(math.Round(w)))
}

// resolveAttnKV writes each kind's fpm.TermDecodeAttnKV with the data's
// wave at perSM (attnWave), KV heads and kernel (Data.KVHeads,
// Data.Kernel), or leaves it out where the SMs or KV heads are not known;
// it returns the kinds, and those it left it out of.
func resolveAttnKV(kinds []KindSpec, d *Data, perSM int) ([]KindSpec, []string) {
	out := slices.Clone(kinds)
	var unsplit []string
	for i, k := range out {
		j := slices.Index(k.Terms, fpm.TermDecodeAttnKV)
		if j < 0 {
			continue
		}
		k.Terms = slices.Clone(k.Terms)
		if d.SMs > 0 && d.KVHeads > 0 && perSM > 0 {
			k.Terms[j] = fpm.DecodeAttnKV(attnWave(d, perSM), d.KVHeads, d.Kernel)
		} else {
			k.Terms = slices.Delete(k.Terms, j, j+1)
			unsplit = append(unsplit, k.Kind)
		}
		out[i] = k
	}
	return out, unsplit
}

// resolveExperts writes each kind's fpm.TermExpertsReached with the
// data's experts-reached term (Data.Experts), or leaves it out where there
// is none (a dense model: the recipe is the one without it); it returns
// the kinds, and the data's notes on the term where a kind asked for it.
func resolveExperts(kinds []KindSpec, d *Data) ([]KindSpec, []string) {
	out := slices.Clone(kinds)
	var notes []string
	for i, k := range out {
		j := slices.Index(k.Terms, fpm.TermExpertsReached)
		if j < 0 {
			continue
		}
		notes = d.ExpertsNotes
		k.Terms = slices.Clone(k.Terms)
		if d.Experts != "" {
			k.Terms[j] = d.Experts
		} else {
			k.Terms = slices.Delete(k.Terms, j, j+1)
		}
		out[i] = k
	}
	return out, slices.Clone(notes)
}

func hasKind(r *fpm.Recipe, kind string) bool {
	return slices.ContainsFunc(r.Kinds, func(k fpm.RecipeKind) bool { return k.Kind == kind })
}

// kvFloor is the smallest context per request of the decode rows.
func kvFloor(d *Data, idx []int) float64 {
	floor := math.Inf(1)
	for _, i := range idx {
		if f := d.Features[i]; f.DecodeRequests > 0 {
			floor = math.Min(floor, f.DecodeKVTokens/f.DecodeRequests)
		}
	}
	if math.IsInf(floor, 1) {
		return 0
	}
	return floor
}

// fitKind fits one kind's table and linear form to rows idx of d.
func fitKind(d *Data, idx []int, spec KindSpec, opt RecipeOptions, boot int) (*fpm.RecipeKind, *KindReport, error) {
	k := &fpm.RecipeKind{Kind: spec.Kind, Rows: len(idx)}
	rep := &KindReport{Kind: spec.Kind, Rows: len(idx), PricedBy: PricedLinear}
	var tab *TableStats
	if len(spec.Coords) > 0 {
		t, st, err := BuildTable(d, benchmarkRows(d, idx), spec.Coords, opt.SnapRel, opt.Seed)
		if err != nil {
			return nil, rep, err
		}
		k.Table, tab = t, st
	}
	rep.Table = tab
	var upper []float64
	if spec.Regimes != "" {
		var err error
		if upper, err = regimeBounds(d, idx, spec, opt); err != nil {
			return nil, rep, err
		}
	}
	lopt := Options{Terms: spec.Terms, Method: opt.Method, Relative: spec.Relative, Degenerate: DegenerateDrop, Bootstrap: boot, Seed: opt.Seed}
	var err error
	if len(upper) > 0 {
		k.Regimes, rep.Regimes, err = fitPieces(d, idx, spec.Regimes, upper, lopt)
	} else {
		var lin *Result
		if lin, err = Linear(d.Subset(idx), lopt); err == nil {
			a := fpm.LinearArtifact(lin.Model)
			k.Terms, k.Coefficients, k.CoefCov = a.Terms, a.Coefficients, a.CoefCov
			rep.Terms, rep.Coefficients, rep.Dropped = a.Terms, a.Coefficients, lin.Dropped
		}
	}
	switch {
	case err == nil:
		if k.Table != nil {
			rep.PricedBy = PricedTableLinear
		}
	case k.Table != nil:
		rep.PricedBy = PricedTable
		rep.Note = fmt.Sprintf("linear form not fitted (%v): steps outside the table's hull are unpriced", err)
	default:
		return nil, rep, err
	}
	if err := k.Validate(); err != nil {
		return nil, rep, fmt.Errorf("fit: recipe kind %s: %w", spec.Kind, err)
	}
	return k, rep, nil
}

// benchmarkRows returns the rows of idx marked as benchmark points, or
// idx when none is.
func benchmarkRows(d *Data, idx []int) []int {
	if d.Benchmark == nil {
		return idx
	}
	var out []int
	for _, i := range idx {
		if d.Benchmark[i] {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		return idx
	}
	return out
}

// heldOutResiduals fills k.Residuals from held-out predictions (see
// FitRecipe): grid lines left out for the table's rows, k-fold
// cross-validation for the rest. Each refit searches its own regime
// bounds: the residuals are those of the whole procedure.
func heldOutResiduals(d *Data, idx []int, spec KindSpec, opt RecipeOptions, k *fpm.RecipeKind, rep *KindReport) error {
	byRegion := map[string][]float64{}
	skipped := 0
	predict := func(train, test []int) {
		kk, _, err := fitKind(d, train, spec, opt, 0)
		if err != nil {
			skipped++
			return
		}
		for _, i := range test {
			ns, _, reg := kk.Estimate(d.Features[i])
			if reg != fpm.RegionUnpriced && ns > 0 {
				byRegion[reg] = append(byRegion[reg], (d.Y[i]-ns)/ns)
			}
		}
	}
	rest := idx
	if k.Table != nil {
		_, st, err := BuildTable(d, benchmarkRows(d, idx), spec.Coords, opt.SnapRel, opt.Seed)
		if err != nil {
			return err
		}
		for a, n := range st.Nodes {
			if n < 2 {
				continue // a single-node axis is a condition of the table, not a line to leave out
			}
			for node := 0; node < n; node++ {
				var test []int
				for j, i := range st.rows {
					if st.node[a][j] == node {
						test = append(test, i)
					}
				}
				predict(without(idx, test), test)
			}
		}
		rest = without(idx, st.rows)
	}
	if len(rest) >= opt.Folds {
		fold := Folds(len(rest), opt.Folds, opt.Seed)
		for f := 0; f < opt.Folds; f++ {
			var test []int
			for j, i := range rest {
				if fold[j] == f {
					test = append(test, i)
				}
			}
			predict(without(idx, test), test)
		}
	}
	source := SourceCV
	if k.Table != nil {
		source = SourceGridLines
	}
	k.Residuals = map[string]*fpm.ResidualQuantiles{}
	var all []float64
	for _, reg := range fpm.Regions {
		rs := byRegion[reg]
		all = append(all, rs...)
		if len(rs) >= opt.MinRows {
			q, err := fpm.NewResidualQuantiles(fpm.ScaleRelative, rs, nil, source)
			if err != nil {
				return err
			}
			k.Residuals[reg] = q
		}
	}
	if len(all) > 0 {
		q, err := fpm.NewResidualQuantiles(fpm.ScaleRelative, all, nil, source)
		if err != nil {
			return err
		}
		k.Residuals[fpm.RegionAll] = q
	}
	if skipped > 0 {
		rep.Note = fmt.Sprintf("%d held-out refits could not be fitted and were skipped", skipped)
	}
	return k.Validate()
}

// without returns the rows of idx not in drop (both ascending).
func without(idx, drop []int) []int {
	out := make([]int, 0, len(idx))
	j := 0
	for _, i := range idx {
		for j < len(drop) && drop[j] < i {
			j++
		}
		if j < len(drop) && drop[j] == i {
			continue
		}
		out = append(out, i)
	}
	return out
}

// summarizeResiduals fills each kind report's residual summary from the
// model (after a calibration too).
func (res *RecipeResult) summarizeResiduals() {
	for i := range res.Kinds {
		rep := &res.Kinds[i]
		k := res.Model.Kind(rep.Kind)
		rep.Residuals = nil
		if k == nil {
			continue
		}
		for _, reg := range append(slices.Clone(fpm.Regions), fpm.RegionAll) {
			q := k.Residuals[reg]
			if q == nil {
				continue
			}
			lo, hi := q.Interval(1, res.Model.Level)
			rep.Residuals = append(rep.Residuals, ResidualSummary{Region: reg, N: q.N, Source: q.Source, LoPct: 100 * (lo - 1), HiPct: 100 * (hi - 1)})
		}
	}
}
