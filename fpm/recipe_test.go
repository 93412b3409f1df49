package fpm

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// relQ is relative residual quantiles lo, 0, hi at 5, 50 and 95%.
func relQ(t testing.TB, lo, hi float64) *ResidualQuantiles {
	t.Helper()
	return &ResidualQuantiles{Scale: ScaleRelative, P: []float64{0.05, 0.5, 0.95}, Values: []float64{lo, 0, hi}, N: 3, Source: "test"}
}

// testRecipe: decode priced by testTable inside its hull and a linear
// form outside; prefill by a linear form alone (no grid); mixed composed.
func testRecipe(t *testing.T) *Recipe { return testRecipeB(t) }

func testRecipeB(t testing.TB) *Recipe {
	t.Helper()
	r := &Recipe{Level: 0.9, Kinds: []RecipeKind{
		{Kind: "prefill", Rows: 10, Terms: []string{TermConst, TermPrefillTokens},
			Coefficients: []Coefficient{{Term: TermConst, Value: 8e6}, {Term: TermPrefillTokens, Value: 2e4}},
			Residuals:    map[string]*ResidualQuantiles{RegionFitted: relQ(t, -0.1, 0.1)}},
		{Kind: "decode", Rows: 8, Table: testTable(), Terms: []string{TermConst, TermDecodeRequests, TermDecodeKVTokens},
			Coefficients: []Coefficient{{Term: TermConst, Value: 5e6}, {Term: TermDecodeRequests, Value: 3e4}, {Term: TermDecodeKVTokens, Value: 40}},
			CoefCov:      [][]float64{{1e10, 0, 0}, {0, 1e4, 0}, {0, 0, 1}},
			Residuals:    map[string]*ResidualQuantiles{RegionInterpolated: relQ(t, -0.02, 0.03), RegionAll: relQ(t, -0.05, 0.08)}},
		{Kind: "mixed", Compose: &Compose{Rule: ComposePrefillMarginalDecode, KVFloorPerRequest: 128}},
	}}
	require.NoError(t, r.Validate())
	return r
}

func TestRecipePricing(t *testing.T) {
	r := testRecipe(t)
	lin := func(b, kv float64) float64 { return 5e6 + 3e4*b + 40*b*kv }
	cases := []struct {
		name     string
		f        Features
		kind     string
		region   string
		ns       float64
		composed bool
	}{
		{"decode inside the hull", dec(8, 1024), "decode", RegionInterpolated, 6e6, false},
		{"decode in the unmeasured corner", dec(32, 4096), "decode", RegionExtrapolated, lin(32, 4096), false},
		{"decode beyond the batch axis", dec(256, 1024), "decode", RegionExtrapolated, lin(256, 1024), false},
		{"prefill (no grid)", Features{PrefillTokens: 1000, PrefillRequests: 1}, "prefill", RegionFitted, 8e6 + 2e7, false},
		{"mixed inside", Features{PrefillTokens: 992, PrefillRequests: 1, DecodeRequests: 8, DecodeKVTokens: 8 * 1024},
			"mixed", RegionFitted, 8e6 + 2e4*1000 + (6e6 - 5.5e6), true},
		{"mixed with an extrapolated decode part", Features{PrefillTokens: 744, PrefillRequests: 1, DecodeRequests: 256, DecodeKVTokens: 256 * 1024},
			"mixed", RegionExtrapolated, 8e6 + 2e4*1000 + (lin(256, 1024) - lin(256, 128)), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := r.Price(c.f, 0.9)
			require.Equal(t, c.kind, p.Kind)
			require.Equal(t, c.region, p.Region)
			require.Equal(t, c.composed, p.Composed)
			require.InDelta(t, c.ns, p.Ns, 1e-3)
			require.InDelta(t, p.Ns, r.PredictNs(c.f), 1e-6, "PredictNs agrees with Price")
			require.Less(t, p.Lo, p.Ns)
			require.Greater(t, p.Hi, p.Ns)
			mid, lo, hi := r.PredictIntervalNs(c.f, 0.9)
			require.Equal(t, [3]float64{p.Ns, p.Lo, p.Hi}, [3]float64{mid, lo, hi})
			_, lo50, hi50 := r.PredictIntervalNs(c.f, 0.5)
			require.Greater(t, lo50, lo, "a narrower level gives a narrower interval")
			require.Less(t, hi50, hi)
		})
	}
}

func TestRecipeIntervals(t *testing.T) {
	r := testRecipe(t)
	z := NormalQuantile(0.95)
	// Inside the hull: the interpolated residuals and the nodes' standard
	// error in quadrature.
	p := r.Price(dec(8, 1024), 0.9)
	require.InDelta(t, 6e6-math.Hypot(0.02*6e6, z*2e5), p.Lo, 1)
	require.InDelta(t, 6e6+math.Hypot(0.03*6e6, z*2e5), p.Hi, 1)
	// Outside: no extrapolated residuals, so the pooled ones, and the
	// coefficient covariance.
	f := dec(256, 1024)
	p = r.Price(f, 0.9)
	se := math.Sqrt(1e10 + 256*256*1e4 + math.Pow(256*1024, 2))
	require.InDelta(t, p.Ns+math.Hypot(0.08*p.Ns, z*se), p.Hi, 1)
	// A composed step without residuals of its own: the parts' deviations
	// in quadrature.
	m := Features{PrefillTokens: 992, PrefillRequests: 1, DecodeRequests: 8, DecodeKVTokens: 8 * 1024}
	p = r.Price(m, 0.9)
	pre := 8e6 + 2e4*1000.0
	require.InDelta(t, p.Ns+math.Hypot(0.1*pre, math.Hypot(0.03*5e5, z*2e5)), p.Hi, 1)
	// With residuals of its own (a calibration), the mixed kind uses them.
	r.Kinds[2].Residuals = map[string]*ResidualQuantiles{RegionAll: relQ(t, -0.3, 0.5)}
	require.NoError(t, r.Validate())
	p = r.Price(m, 0.9)
	require.InDelta(t, p.Ns*1.5, p.Hi, p.Ns*0.01)
}

func TestRecipeUnpricedKind(t *testing.T) {
	r := testRecipe(t)
	r.Kinds = r.Kinds[1:2] // decode only
	require.NoError(t, r.Validate())
	for _, f := range []Features{{PrefillTokens: 100, PrefillRequests: 1}, {PrefillTokens: 100, PrefillRequests: 1, DecodeRequests: 2, DecodeKVTokens: 300}} {
		p := r.Price(f, 0.9)
		require.Equal(t, RegionUnpriced, p.Region)
		require.Zero(t, p.Ns)
		require.Zero(t, r.PredictNs(f))
	}
}

func TestRecipeArtifactRoundTrip(t *testing.T) {
	r := testRecipe(t)
	path := filepath.Join(t.TempDir(), "recipe.json")
	require.NoError(t, (&Artifact{Form: FormRecipe, Recipe: r, CreatedBy: "test"}).Save(path))
	m, a, err := load(path)
	require.NoError(t, err)
	require.Equal(t, FormRecipe, a.Form)
	back := m.(*Recipe)
	require.Equal(t, []string{TermDecodeRequests, CoordKVPerRequest}, back.Kind("decode").Table.Coords(), "the coordinates are data")
	require.Equal(t, r.Kind("decode").Terms, back.Kind("decode").Terms)
	for _, f := range []Features{dec(8, 1024), dec(300, 5000), {PrefillTokens: 700, PrefillRequests: 2},
		{PrefillTokens: 700, PrefillRequests: 2, DecodeRequests: 30, DecodeKVTokens: 30 * 2000}} {
		require.Equal(t, r.Price(f, 0.9), back.Price(f, 0.9))
	}
	require.Equal(t, 0.9, LevelOf(back))
}

func TestRecipeValidate(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Recipe)
		want string
	}{
		{"level", func(r *Recipe) { r.Level = 1 }, "level"},
		{"unknown kind", func(r *Recipe) { r.Kinds[0].Kind = "chunk" }, "want prefill, decode or mixed"},
		{"kind twice", func(r *Recipe) { r.Kinds[0].Kind = "decode" }, "twice"},
		{"compose without decode", func(r *Recipe) { r.Kinds = append(r.Kinds[:1], r.Kinds[2]) }, "lacks a prefill or a decode"},
		{"compose rule", func(r *Recipe) { r.Kinds[2].Compose.Rule = "sum" }, "compose rule"},
		{"empty kind", func(r *Recipe) { r.Kinds[0].Terms, r.Kinds[0].Coefficients = nil, nil }, "neither a table"},
		{"coefficient for another term", func(r *Recipe) { r.Kinds[0].Coefficients[1].Term = TermDecodeRequests }, "coefficient 1"},
		{"covariance shape", func(r *Recipe) { r.Kinds[1].CoefCov = r.Kinds[1].CoefCov[:2] }, "coef_cov"},
		{"residual region", func(r *Recipe) { r.Kinds[0].Residuals["inside"] = relQ(t, -1, 1) }, "unknown region"},
		{"absolute residuals", func(r *Recipe) { r.Kinds[0].Residuals[RegionFitted].Scale = ScaleAbsolute }, "relative"},
		{"bad table", func(r *Recipe) { r.Kinds[1].Table.Axes[0].Coord = "nope" }, "unknown coordinate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := testRecipe(t)
			c.edit(r)
			require.ErrorContains(t, r.Validate(), c.want)
		})
	}
}

func TestBoundAndIntervalLevel(t *testing.T) {
	r := testRecipe(t)
	f := dec(8, 1024)
	mid, lo, hi := r.PredictIntervalNs(f, 0.8)
	require.Equal(t, lo, Bound{M: r, Level: 0.8}.PredictNs(f))
	require.Equal(t, hi, Bound{M: r, Level: 0.8, Upper: true}.PredictNs(f))
	require.Less(t, lo, mid)
	require.Equal(t, 0.9, IntervalLevel(r, 0), "0: the model's own level")
	require.Equal(t, 0.5, IntervalLevel(r, 0.5))
	require.Zero(t, IntervalLevel(r, -1), "negative: none")
	rf := NewRoofline(h200, llama8B)
	require.Zero(t, IntervalLevel(rf, 0.9), "no intervals on a roofline")
	lin, err := NewLinear([]string{TermConst}, []float64{1})
	require.NoError(t, err)
	require.Zero(t, IntervalLevel(lin, 0), "no residuals or covariance: zero-width intervals are none")
	lin.Residuals = &ResidualQuantiles{Scale: ScaleRelative, P: []float64{0.05, 0.5, 0.95}, Values: []float64{-0.1, 0, 0.1}}
	require.Equal(t, DefaultLevel, IntervalLevel(lin, 0))
}

// withRegimes replaces the decode kind's linear form of testRecipe by two
// regimes split at 32 requests: the batch padded to its longest context
// up to 32, the longest context alone above.
func withRegimes(t *testing.T) *Recipe {
	t.Helper()
	r := testRecipe(t)
	d := &r.Kinds[1]
	d.Terms, d.Coefficients, d.CoefCov = nil, nil, nil
	d.Regimes = &Regimes{Coord: TermDecodeRequests, Upper: []float64{32}, Pieces: []LinearForm{
		{Rows: 5, Terms: []string{TermConst, TermDecodeBatchMaxKV}, Coefficients: []Coefficient{{Term: TermConst, Value: 5e6}, {Term: TermDecodeBatchMaxKV, Value: 40}},
			CoefCov: [][]float64{{1e10, 0}, {0, 1}}},
		{Rows: 5, Terms: []string{TermConst, TermDecodeMaxKV}, Coefficients: []Coefficient{{Term: TermConst, Value: 6e6}, {Term: TermDecodeMaxKV, Value: 1500}}},
	}}
	require.NoError(t, r.Validate())
	return r
}

func TestRecipeRegimes(t *testing.T) {
	r := withRegimes(t)
	ragged := func(b, mean, longest float64) Features {
		f := dec(b, mean)
		f.DecodeMaxKVTokens = longest
		return f
	}
	cases := []struct {
		name   string
		f      Features
		region string
		ns     float64
	}{
		{"inside the table", dec(8, 1024), RegionInterpolated, 6e6},
		{"the lower regime, its bound included", ragged(32, 4096, 5000), RegionExtrapolated, 5e6 + 40*32*5000},
		{"the upper regime from the bound up", ragged(33, 2000, 5000), RegionExtrapolated, 6e6 + 1500*5000},
		{"beyond the table", ragged(256, 1024, 1024), RegionExtrapolated, 6e6 + 1500*1024},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := r.Price(c.f, 0.9)
			require.Equal(t, c.region, p.Region)
			require.InDelta(t, c.ns, p.Ns, 1e-3)
			if c.region == RegionExtrapolated {
				require.Same(t, r.Kind("decode").Linear(c.f), r.Kind("decode").Regimes.lins[r.Kind("decode").Regimes.Piece(c.f)])
			}
		})
	}
	// The lower piece's covariance widens its intervals; the upper has none.
	lo := r.Price(ragged(32, 4096, 5000), 0.9)
	z := NormalQuantile(0.95)
	se := math.Sqrt(1e10 + math.Pow(32*5000, 2))
	require.InDelta(t, lo.Ns+math.Hypot(0.08*lo.Ns, z*se), lo.Hi, 1)

	path := filepath.Join(t.TempDir(), "recipe.json")
	require.NoError(t, (&Artifact{Form: FormRecipe, Recipe: r, CreatedBy: "test"}).Save(path))
	m, _, err := load(path)
	require.NoError(t, err)
	back := m.(*Recipe)
	require.Equal(t, []float64{32}, back.Kind("decode").Regimes.Upper)
	for _, c := range cases {
		require.Equal(t, r.Price(c.f, 0.9), back.Price(c.f, 0.9))
	}
}

func TestRecipeRegimesValidate(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Regimes, *RecipeKind)
		want string
	}{
		{"coordinate", func(g *Regimes, _ *RecipeKind) { g.Coord = "batch" }, "unknown coordinate"},
		{"pieces for bounds", func(g *Regimes, _ *RecipeKind) { g.Upper = append(g.Upper, 64) }, "2 pieces for 2 bounds"},
		{"bounds ascending", func(g *Regimes, _ *RecipeKind) { g.Upper = []float64{math.NaN()} }, "strictly ascending"},
		{"piece terms", func(g *Regimes, _ *RecipeKind) { g.Pieces[1].Terms = nil }, "piece 1 has no terms"},
		{"piece coefficient", func(g *Regimes, _ *RecipeKind) { g.Pieces[0].Coefficients[1].Term = TermConst }, "piece 0"},
		{"both forms", func(_ *Regimes, k *RecipeKind) {
			k.Terms, k.Coefficients = []string{TermConst}, []Coefficient{{Term: TermConst, Value: 1}}
		}, "both terms and regimes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := withRegimes(t)
			k := &r.Kinds[1]
			c.edit(k.Regimes, k)
			require.ErrorContains(t, r.Validate(), c.want)
		})
	}
}

// An artifact the recipe wrote before regimes, tables with conditions and
// ragged terms existed (fitted on the old H200 steady grid) still loads
// and prices as it did: one linear form per kind, its table over batch ×
// context per request.
func TestRecipeArtifactBeforeRegimes(t *testing.T) {
	m, a, err := load(filepath.Join("testdata", "recipe-v1.json"))
	require.NoError(t, err)
	require.Equal(t, FormRecipe, a.Form)
	r := m.(*Recipe)
	d := r.Kind("decode")
	require.Nil(t, d.Regimes)
	require.Equal(t, []string{TermConst, TermDecodeRequests, TermDecodeKVTokens}, d.Terms)
	require.Equal(t, []string{TermDecodeRequests, CoordKVPerRequest}, d.Table.Coords())
	p := r.Price(dec(1, 128), 0.9)
	require.Equal(t, RegionInterpolated, p.Region)
	require.Equal(t, d.Table.Ns[0], p.Ns, "a grid node prices at its measured time")
	p = r.Price(dec(1024, 512), 0.9)
	require.Equal(t, RegionExtrapolated, p.Region)
	require.InDelta(t, d.Linear(dec(1024, 512)).PredictNs(dec(1024, 512)), p.Ns, 1e-6)
	require.True(t, r.Price(Features{PrefillTokens: 100, PrefillRequests: 1, DecodeRequests: 8, DecodeKVTokens: 8000}, 0.9).Ns > 0)
}

// withWalk is testRecipe without its decode table, whose prefill form
// prices the context its chunks read (1 µs a token, standard error
// 0.1 µs), its mixed steps composed with the decode rows' KV walk.
func withWalk(t *testing.T) *Recipe {
	t.Helper()
	r := testRecipe(t)
	r.Kinds[1].Table = nil
	p := &r.Kinds[0]
	p.Terms = []string{TermConst, TermPrefillTokens, TermPrefillKVTokens}
	p.Coefficients = append(p.Coefficients, Coefficient{Term: TermPrefillKVTokens, Value: 1000})
	p.CoefCov = [][]float64{{0, 0, 0}, {0, 0, 0}, {0, 0, 1e4}}
	r.Kinds[2].Compose.DecodeWalk = true
	require.NoError(t, r.Validate())
	return r
}

// A composed mixed step's decode rows cost the larger of the decode
// form's marginal reads and their walk at the longest context: the walk
// for a few long requests, the reads for a batch of many.
func TestRecipeDecodeWalk(t *testing.T) {
	mixed := func(b, mean, longest float64) Features {
		return Features{PrefillTokens: 1000 - b, PrefillRequests: 1, DecodeRequests: b, DecodeKVTokens: b * mean, DecodeMaxKVTokens: longest}
	}
	pre := 8e6 + 2e4*1000.0
	reads := func(b, mean float64) float64 { return 40 * b * (mean - 128) }
	cases := []struct {
		name    string
		f       Features
		walk    float64 // the walk's price, 0 where the reads are larger
		without float64
	}{
		{"a few long requests walk", mixed(4, 1000, 3000), 1000 * (3000 - 128), reads(4, 1000)},
		{"the longest unknown: the mean", mixed(4, 1000, 0), 1000 * (1000 - 128), reads(4, 1000)},
		{"a large batch reads", mixed(256, 1024, 1024), 0, reads(256, 1024)},
		{"at the floor nothing", mixed(4, 128, 128), 0, 0},
	}
	with, plain := withWalk(t), withWalk(t)
	plain.Kinds[2].Compose.DecodeWalk = false
	require.NoError(t, plain.Validate())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := pre + max(c.walk, c.without)
			p := with.Price(c.f, 0.9)
			require.True(t, p.Composed)
			require.InDelta(t, want, p.Ns, 1e-3)
			require.InDelta(t, p.Ns, with.PredictNs(c.f), 1e-6)
			require.InDelta(t, pre+c.without, plain.PredictNs(c.f), 1e-3, "without DecodeWalk the reads alone")
			if c.walk > 0 {
				// The walk's interval: the prefill form's residuals and its
				// coefficient's standard error, beside the prefill pass's.
				z, reach := NormalQuantile(0.95), c.walk/1000
				require.InDelta(t, p.Ns+math.Hypot(0.1*pre, math.Hypot(0.1*c.walk, z*100*reach)), p.Hi, 1)
			}
		})
	}
	path := filepath.Join(t.TempDir(), "recipe.json")
	require.NoError(t, (&Artifact{Form: FormRecipe, Recipe: with, CreatedBy: "test"}).Save(path))
	m, _, err := load(path)
	require.NoError(t, err)
	require.True(t, m.(*Recipe).Kind("mixed").Compose.DecodeWalk)
	require.Equal(t, with.Price(cases[0].f, 0.9), m.(*Recipe).Price(cases[0].f, 0.9))
}

// The composed decode work is the decode form at the decode rows' own
// features, the longest context included: a form whose regimes price the
// batch padded to its longest request prices a ragged mixed step's
// decodes so, against the floor.
func TestRecipeComposedLongest(t *testing.T) {
	r := withRegimes(t)
	r.Kinds[1].Table = nil
	require.NoError(t, r.Validate())
	f := Features{PrefillTokens: 900, PrefillRequests: 1, DecodeRequests: 8, DecodeKVTokens: 8 * 1000, DecodeMaxKVTokens: 3000, PaddedBatch: 8}
	require.InDelta(t, 8e6+2e4*908+40*8*(3000-128), r.PredictNs(f), 1e-3)
}

func TestRecipeLinears(t *testing.T) {
	r := withRegimes(t)
	require.Len(t, r.Kind("decode").Linears(), 2)
	require.Equal(t, []string{TermConst, TermDecodeMaxKV}, r.Kind("decode").Linears()[1].Terms)
	require.Len(t, r.Kind("prefill").Linears(), 1)
	require.Empty(t, r.Kind("mixed").Linears(), "a composed kind has no form of its own")
}
