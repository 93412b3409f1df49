package fit

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
)

// gridTruth is a decode cost with a curvature in the batch that a linear
// form cannot follow (so the table and the linear form differ inside the
// grid), in ns.
func gridTruth(b, ctx float64) float64 { return 4e6 + 2e4*b + 30*b*ctx + 3e3*math.Pow(b, 1.4) }

var (
	gridBatches  = []int{1, 2, 4, 8, 16, 32, 64, 128, 256}
	gridContexts = []int{128, 512, 2048, 8192}
)

// gridKVCap is the KV capacity of the synthetic engine: points of more
// KV tokens are not measured (the missing corner of a real grid).
const gridKVCap = 600_000

// benchGrid is a decode benchmark: every (batch, context) that fits the KV
// capacity, `repeats` times, with 1% multiplicative noise.
func benchGrid(repeats int, seed uint64) []datasets.Step {
	rng := rand.New(rand.NewPCG(seed, 2))
	var out []datasets.Step
	for _, b := range gridBatches {
		for _, ctx := range gridContexts {
			if b*ctx > gridKVCap {
				continue
			}
			for r := 0; r < repeats; r++ {
				y := gridTruth(float64(b), float64(ctx)) * (1 + 0.01*rng.NormFloat64())
				out = append(out, datasets.Step{StepID: int64(len(out)), Kind: datasets.KindDecode, Role: datasets.RoleMeasured, Valid: true,
					BenchmarkID: int64(len(out)), NumCachedReqs: int32(b), NumDecodeRequests: int32(b), SumDecodeKVTokens: int64(b * ctx),
					TotalScheduledTokens: int64(b), WallTimeNs: int64(y), GPUTimeNs: -1})
			}
		}
	}
	return out
}

// trafficDecode draws n decode steps inside the grid's hull (batch ≤ 64,
// context 128..2048) costing extra times the truth, with 1% noise.
func trafficDecode(n int, extra float64, seed uint64) []datasets.Step {
	rng := rand.New(rand.NewPCG(seed, 3))
	out := make([]datasets.Step, n)
	for i := range out {
		b := 1 + rng.IntN(64)
		ctx := 128 + rng.IntN(1920)
		y := gridTruth(float64(b), float64(ctx)) * extra * (1 + 0.01*rng.NormFloat64())
		out[i] = datasets.Step{StepID: int64(100000 + i), Kind: datasets.KindDecode, Role: datasets.RoleProduction, Valid: true, BenchmarkID: -1,
			NumCachedReqs: int32(b), NumDecodeRequests: int32(b), SumDecodeKVTokens: int64(b * ctx), TotalScheduledTokens: int64(b),
			WallTimeNs: int64(y), GPUTimeNs: -1}
	}
	return out
}

func TestFitRecipeOnAGrid(t *testing.T) {
	d := decodeData(t, benchGrid(3, 1))
	res, err := FitRecipe(d, RecipeOptions{Bootstrap: 50, Seed: 1})
	require.NoError(t, err)
	require.Empty(t, res.Warnings)
	dk := res.Model.Kind(datasets.KindDecode)
	require.NotNil(t, dk)
	require.NotNil(t, dk.Table)
	require.Equal(t, []string{fpm.TermDecodeRequests, fpm.CoordKVPerRequest, fpm.CoordKVMaxRatio}, dk.Table.Coords())
	rep := res.Kinds[0]
	require.Equal(t, PricedTableLinear, rep.PricedBy)
	require.Equal(t, []int{len(gridBatches), len(gridContexts), 1}, rep.Table.Nodes, "uniform batches: one kv_max_ratio node")
	require.Zero(t, rep.Table.OffGrid)
	missing := 0
	for _, b := range gridBatches {
		for _, c := range gridContexts {
			if b*c > gridKVCap {
				missing++
			}
		}
	}
	require.Equal(t, missing, rep.Table.Missing)
	require.Equal(t, 3, rep.Table.MaxRepeats)
	require.NotNil(t, dk.Table.SE, "repeats give the nodes a standard error")
	require.NotEmpty(t, dk.Linear(dec(1024, 512)).CoefCov, "the bootstrap gives the linear form a covariance")
	for _, reg := range []string{fpm.RegionInterpolated, fpm.RegionExtrapolated, fpm.RegionAll} {
		require.NotNil(t, dk.Residuals[reg], reg)
		require.Equal(t, SourceGridLines, dk.Residuals[reg].Source)
	}
	require.Nil(t, res.Model.Kind(datasets.KindMixed), "no prefill kind to compose mixed steps from")

	// Regions: the measured corner is interpolated, the missing corner and
	// beyond the largest batch extrapolated by the linear form.
	require.Equal(t, fpm.RegionInterpolated, res.Model.Price(dec(16, 1000), 0.9).Region)
	require.Equal(t, fpm.RegionExtrapolated, res.Model.Price(dec(256, 8192), 0.9).Region)
	require.Equal(t, fpm.RegionExtrapolated, res.Model.Price(dec(1024, 512), 0.9).Region)
	ragged := dec(16, 1000)
	ragged.DecodeMaxKVTokens = 1500
	require.Equal(t, fpm.RegionExtrapolated, res.Model.Price(ragged, 0.9).Region, "a ragged batch is outside a table of uniform ones")
	require.InDelta(t, dk.Linear(dec(1024, 512)).PredictNs(dec(1024, 512)), res.Model.PredictNs(dec(1024, 512)), 1e-6)

	// Inside the hull the table beats the linear form on the curvature.
	fresh := decodeData(t, trafficDecode(2000, 1, 7))
	tab := Evaluate(res.Model, fresh, 0)
	linOnly := Evaluate(linearOnly{dk}, fresh, 0)
	t.Logf("inside the hull: recipe MAPE %.2f%%, its linear form alone %.2f%%", tab.Overall.MAPE, linOnly.Overall.MAPE)
	require.Less(t, tab.Overall.MAPE, linOnly.Overall.MAPE)
	require.Less(t, tab.Overall.MAPE, 2.5)

	// The held-out residuals cover new steps drawn from the same truth
	// (conservatively: an interior line is interpolated across a cell
	// twice as wide).
	cov := EvaluateIntervals(res.Model, fresh, 0.9)
	t.Logf("coverage of the 90%% intervals on steps from the benchmark's own truth: %.1f%% (width %.1f%%)", cov.Overall.Pct, cov.Overall.MeanWidthPct)
	require.GreaterOrEqual(t, cov.Overall.Pct, 85.0)
	require.Equal(t, cov.Overall, cov.ByRegion[fpm.RegionInterpolated])
}

func dec(b, kvPer float64) fpm.Features {
	return fpm.Features{DecodeRequests: b, DecodeKVTokens: b * kvPer, DecodeMaxKVTokens: kvPer, PaddedBatch: b}
}

func TestFitRecipeScatteredRowsAreLinear(t *testing.T) {
	d := decodeData(t, synthDecode(400, 2))
	decode := DefaultKindSpecs[1]
	decode.Terms, decode.Regimes, decode.Relative = DecodeTerms, "", false
	res, err := FitRecipe(d, RecipeOptions{Seed: 1, Kinds: []KindSpec{decode}})
	require.NoError(t, err)
	rep := res.Kinds[0]
	require.Equal(t, PricedLinear, rep.PricedBy)
	require.Contains(t, rep.Table.Reason, "distinct values")
	k := res.Model.Kind(datasets.KindDecode)
	require.Nil(t, k.Table)
	require.Equal(t, SourceCV, k.Residuals[fpm.RegionFitted].Source)
	p := res.Model.Price(dec(100, 2000), 0.9)
	require.Equal(t, fpm.RegionFitted, p.Region)
	for i, c := range k.Coefficients {
		require.InEpsilon(t, truth[i], c.Value, 0.1, c.Term)
	}
	cov := EvaluateIntervals(res.Model, decodeData(t, synthDecode(1000, 3)), 0.9)
	t.Logf("scattered rows, cross-validated residuals: coverage %.1f%%", cov.Overall.Pct)
	require.InDelta(t, 90, cov.Overall.Pct, 5)
}

// mixedSteps are mixed steps: one 512-token chunk riding with b decodes.
func mixedSteps(n int, seed uint64) []datasets.Step {
	rng := rand.New(rand.NewPCG(seed, 4))
	out := make([]datasets.Step, n)
	for i := range out {
		b, c, ctx := 1+rng.IntN(32), 64+rng.IntN(1024), 128+rng.IntN(2048)
		y := 9e6 + 2e4*float64(c) + gridTruth(float64(b), float64(ctx)) - 4e6
		out[i] = datasets.Step{StepID: int64(200000 + i), Kind: datasets.KindMixed, Role: datasets.RoleProduction, Valid: true, BenchmarkID: -1,
			NumPrefillRequests: 1, SumPrefillTokens: int64(c), NumDecodeRequests: int32(b), SumDecodeKVTokens: int64(b * ctx),
			NumCachedReqs: int32(b + 1), TotalScheduledTokens: int64(b + c), WallTimeNs: int64(y * (1 + 0.01*rng.NormFloat64())), GPUTimeNs: -1}
	}
	return out
}

func TestFitRecipeMixedComposedUnlessMeasured(t *testing.T) {
	pre := prefillSteps(30)
	for i := range pre {
		pre[i].SumPrefillTokens = int64(128 * (1 + i%8))
	}
	base := append(benchGrid(1, 2), pre...)
	for _, c := range []struct {
		mixed int
		want  string
	}{{0, PricedComposed}, {5, PricedComposed}, {40, PricedLinear}} {
		d := decodeData(t, append(append([]datasets.Step(nil), base...), mixedSteps(c.mixed, 5)...))
		res, err := FitRecipe(d, RecipeOptions{Seed: 1})
		require.NoError(t, err)
		m := res.Model.Kind(datasets.KindMixed)
		require.NotNil(t, m)
		require.Equal(t, c.want, res.Kinds[len(res.Kinds)-1].PricedBy, "%d mixed rows", c.mixed)
		require.Equal(t, c.want == PricedComposed, m.Compose != nil)
		if m.Compose != nil {
			require.Equal(t, 128.0, m.Compose.KVFloorPerRequest, "the smallest measured context")
		}
		p := res.Model.Price(fpm.Features{PrefillTokens: 512, PrefillRequests: 1, DecodeRequests: 8, DecodeKVTokens: 8000}, 0.9)
		require.Equal(t, datasets.KindMixed, p.Kind)
		require.Equal(t, c.want == PricedComposed, p.Composed)
		require.Greater(t, p.Ns, 0.0)
	}
}

// chunkPoints are prefill benchmark points, one chunk each, whose
// programs walk the context they read at walk ns a token (and chunks at
// a context only with atContext).
func chunkPoints(walk float64, atContext bool) []datasets.Step {
	var out []datasets.Step
	for _, tok := range []int{64, 128, 256, 512, 1024, 2048} {
		for _, ctx := range []int{0, 2000} {
			if ctx > 0 && !atContext {
				continue
			}
			id := int64(10000 + len(out))
			out = append(out, datasets.Step{StepID: id, Kind: datasets.KindPrefill, Role: datasets.RoleMeasured, Valid: true, BenchmarkID: id,
				NumNewReqs: 1, NumPrefillRequests: 1, SumPrefillTokens: int64(tok), SumPrefillKVTokens: int64(ctx), TotalScheduledTokens: int64(tok),
				WallTimeNs: int64(5e6 + 2e4*float64(tok) + walk*float64(ctx)), GPUTimeNs: -1})
		}
	}
	return out
}

// A uniform grid whose prefill points include chunks at a context
// identifies how fast the attention's programs walk the KV: composed
// mixed steps price their decode rows' walk over the longest context, a
// grid without such chunks says it cannot.
func TestFitRecipeDecodeWalk(t *testing.T) {
	const walk = 1200.0
	mixed := fpm.Features{PrefillTokens: 100, PrefillRequests: 1, DecodeRequests: 4, DecodeKVTokens: 4 * 1000, DecodeMaxKVTokens: 4000}
	pass := 5e6 + 2e4*104 // the prefill pass, the 4 decode tokens riding on it
	for _, atContext := range []bool{true, false} {
		d := decodeData(t, append(benchGrid(1, 2), chunkPoints(walk, atContext)...))
		res, err := FitRecipe(d, RecipeOptions{Seed: 1})
		require.NoError(t, err)
		m := res.Model.Kind(datasets.KindMixed)
		rep := res.Kinds[len(res.Kinds)-1]
		require.Equal(t, PricedComposed, rep.PricedBy)
		require.Len(t, rep.Identified, 1)
		require.Equal(t, atContext, m.Compose.DecodeWalk)
		dk := res.Model.Kind(datasets.KindDecode)
		at, _, _ := dk.Estimate(fpm.Features{DecodeRequests: 4, DecodeKVTokens: 4000, DecodeMaxKVTokens: 4000})
		floor, _, _ := dk.Estimate(fpm.Features{DecodeRequests: 4, DecodeKVTokens: 4 * 128, DecodeMaxKVTokens: 128})
		marg := max(0, at-floor)
		got := res.Model.PredictNs(mixed) - pass
		if atContext {
			require.Contains(t, rep.Identified[0], "identified by 6 prefill rows at a context")
			require.InEpsilon(t, walk*(4000-128), got, 0.01, "the walk of the longest request, not its reads")
			require.Greater(t, got, 10*marg)
		} else {
			require.Contains(t, rep.Identified[0], "not priced (0 prefill rows read a context")
			require.InDelta(t, marg, got, 1e3, "the decode form's reads alone")
		}
	}
}

func TestCalibrateRecipeOnATrafficSplit(t *testing.T) {
	res, err := FitRecipe(decodeData(t, benchGrid(1, 3)), RecipeOptions{Bootstrap: 50, Seed: 1})
	require.NoError(t, err)
	// Traffic costs 4% more than the benchmark measured, with more noise.
	traffic := trafficDecode(4000, 1.04, 9)
	for i := range traffic {
		traffic[i].WallTimeNs = int64(float64(traffic[i].WallTimeNs) * (1 + 0.06*math.Sin(float64(i))))
	}
	var calib, test []datasets.Step
	for _, st := range traffic {
		if HalfOf(st.StepID) == 1 {
			calib = append(calib, st)
		} else {
			test = append(test, st)
		}
	}
	before := EvaluateIntervals(res.Model, decodeData(t, test), 0.9)
	acts, err := CalibrateRecipe(res.Model, decodeData(t, calib), 20, "calibration on half 1")
	require.NoError(t, err)
	after := EvaluateIntervals(res.Model, decodeData(t, test), 0.9)
	t.Logf("coverage on the held-out half: %.1f%% from the benchmark's residuals, %.1f%% calibrated (%v)", before.Overall.Pct, after.Overall.Pct, acts)
	require.Less(t, before.Overall.Pct, 50.0, "the benchmark's residuals do not know the traffic's extra cost")
	require.InDelta(t, 90, after.Overall.Pct, 5)
	k := res.Model.Kind(datasets.KindDecode)
	require.Equal(t, "calibration on half 1", k.Residuals[fpm.RegionInterpolated].Source)
	byRegion := map[string]string{}
	for _, a := range acts {
		byRegion[a.Region] = a.Action
	}
	require.Equal(t, CalibReplaced, byRegion[fpm.RegionInterpolated])
	require.Equal(t, CalibWidened, byRegion[fpm.RegionExtrapolated], "no calibration rows outside the hull: the held-out residuals widened")
	require.Equal(t, CalibPooled, byRegion[fpm.RegionAll])
	lo := k.Residuals[fpm.RegionExtrapolated]
	require.GreaterOrEqual(t, lo.Quantile(0.95), k.Residuals[fpm.RegionAll].Quantile(0.95))

	// Too few calibration rows: the held-out residuals stay.
	res2, err := FitRecipe(decodeData(t, benchGrid(1, 3)), RecipeOptions{Seed: 1})
	require.NoError(t, err)
	acts, err = CalibrateRecipe(res2.Model, decodeData(t, calib[:5]), 20, "few")
	require.NoError(t, err)
	require.Equal(t, []CalibratedRegion{{Kind: datasets.KindDecode, Region: fpm.RegionAll, N: 5, Action: CalibKept}}, acts)
	require.Equal(t, SourceGridLines, res2.Model.Kind(datasets.KindDecode).Residuals[fpm.RegionAll].Source)
}

func TestHalfOfSplitsEvenly(t *testing.T) {
	n := [3]int{}
	for id := int64(0); id < 20000; id++ {
		h := HalfOf(id)
		require.Equal(t, h, HalfOf(id), "fixed per id")
		n[h]++
	}
	require.Zero(t, n[0])
	require.InDelta(t, 10000, n[1], 200)
	steps := synthDecode(300, 1)
	one, err := Select(steps, Selection{Half: 1})
	require.NoError(t, err)
	two, err := Select(steps, Selection{Half: 2})
	require.NoError(t, err)
	require.Equal(t, len(steps), len(one)+len(two))
	for _, s := range one {
		require.Equal(t, 1, HalfOf(s.StepID))
	}
	require.ErrorContains(t, Selection{Half: 3}.Check(), "half 3")
}

func TestBuildTableRefusesWhatIsNotAGrid(t *testing.T) {
	// A 3×3 diagonal is not a grid, nor the 2×2 diagonal left when its
	// sparsest line goes (nothing to interpolate between); three corners
	// of a 2×2 rectangle are.
	d := decodeData(t, benchGrid(1, 4))
	idx := []int{}
	for i, f := range d.Features {
		kv := f.DecodeKVTokens / f.DecodeRequests
		if (f.DecodeRequests == 1 && kv == 128) || (f.DecodeRequests == 4 && kv == 512) || (f.DecodeRequests == 16 && kv == 2048) {
			idx = append(idx, i)
		}
	}
	require.Len(t, idx, 3)
	coords := []string{fpm.TermDecodeRequests, fpm.CoordKVPerRequest}
	tb, st, err := BuildTable(d, idx, coords, 0.02, 1)
	require.NoError(t, err)
	require.Nil(t, tb)
	require.Contains(t, st.Reason, "nothing to interpolate between")
	tb, st, err = BuildTable(d, idx[:2], coords, 0.02, 1)
	require.NoError(t, err)
	require.Nil(t, tb)
	require.Contains(t, st.Reason, "nothing to interpolate between")
	for i, f := range d.Features {
		if f.DecodeRequests == 4 && f.DecodeKVTokens == 4*128 {
			idx = append(idx[:2], i)
		}
	}
	tb, st, err = BuildTable(d, idx, coords, 0.02, 1)
	require.NoError(t, err)
	require.NotNil(t, tb, "%s", st.Reason)
	_, _, err = BuildTable(d, idx, []string{"batch"}, 0.02, 1)
	require.ErrorContains(t, err, "unknown coordinate")
}

// linearOnly prices every step with a recipe kind's linear form.
type linearOnly struct{ k *fpm.RecipeKind }

func (l linearOnly) PredictNs(f fpm.Features) float64 { return l.k.Linear(f).PredictNs(f) }
