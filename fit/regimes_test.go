package fit

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
)

// splitKernel is a decode attention kernel with two regimes: up to 32
// requests it splits each request's KV walk over idle SMs, so a step
// waits for the batch padded to its longest context; above, one program
// per request, and a step waits for the longest context plus a wave term.
func splitKernel(b, longest, kv float64) float64 {
	if b <= 32 {
		return 5e6 + 3e4*b + 40*b*longest
	}
	return 6e6 + 2e4*b + 1500*longest + 10*kv
}

// raggedGrid is a decode benchmark of uniform and ragged batches (the
// longest context 1, 1.5 and 3 times the mean) priced by cost, with 1%
// noise.
func raggedGrid(cost func(b, longest, kv float64) float64, seed uint64) []datasets.Step {
	rng := rand.New(rand.NewPCG(seed, 5))
	var out []datasets.Step
	for _, b := range []int{1, 2, 4, 8, 16, 32, 64, 128, 256} {
		for _, ctx := range []int{128, 512, 2048} {
			for _, ratio := range []float64{1, 1.5, 3} {
				if b == 1 && ratio > 1 {
					continue
				}
				longest := math.Round(ratio * float64(ctx))
				kv := int64(b * ctx)
				y := cost(float64(b), longest, float64(kv)) * (1 + 0.01*rng.NormFloat64())
				out = append(out, datasets.Step{StepID: int64(len(out)), Kind: datasets.KindDecode, Role: datasets.RoleMeasured, Valid: true,
					BenchmarkID: int64(len(out)), NumCachedReqs: int32(b), NumDecodeRequests: int32(b), SumDecodeKVTokens: kv,
					MaxDecodeKVTokens: int64(longest), VarDecodeKVTokens: math.Pow((longest-float64(ctx))/2, 2),
					TotalScheduledTokens: int64(b), WallTimeNs: int64(y), GPUTimeNs: -1})
			}
		}
	}
	return out
}

func TestFitRecipeFindsRegimes(t *testing.T) {
	res, err := FitRecipe(decodeData(t, raggedGrid(splitKernel, 1)), RecipeOptions{Seed: 1})
	require.NoError(t, err)
	k := res.Model.Kind(datasets.KindDecode)
	require.NotNil(t, k.Regimes, "two kernel regimes: the held-out error splits the linear form")
	require.Equal(t, fpm.TermPaddedBatch, k.Regimes.Coord, "the CUDA graph's batch (eager here: the batch)")
	require.Equal(t, []float64{32}, k.Regimes.Upper, "the bound where the kernel changes launch")
	require.Empty(t, k.Terms)
	rep := res.Kinds[0]
	require.Len(t, rep.Regimes, 2)
	require.Equal(t, "padded_batch <= 32", rep.Regimes[0].Range)
	require.Equal(t, "padded_batch > 32", rep.Regimes[1].Range)
	require.Equal(t, len(raggedGrid(splitKernel, 1)), rep.Regimes[0].Rows+rep.Regimes[1].Rows)

	// Steps between the grid's batches and contexts, ragged: the pieces
	// price them; one linear form cannot.
	rng := rand.New(rand.NewPCG(7, 7))
	var steps []datasets.Step
	for i := range 500 {
		b := 2 + rng.IntN(200)
		mean := 128 + rng.IntN(1900)
		longest := float64(mean) * (1 + 2*rng.Float64())
		kv := int64(b * mean)
		steps = append(steps, datasets.Step{StepID: int64(i), Kind: datasets.KindDecode, Role: datasets.RoleProduction, Valid: true, BenchmarkID: -1,
			NumDecodeRequests: int32(b), SumDecodeKVTokens: kv, MaxDecodeKVTokens: int64(longest), VarDecodeKVTokens: 1,
			TotalScheduledTokens: int64(b), WallTimeNs: int64(splitKernel(float64(b), math.Round(longest), float64(kv))), GPUTimeNs: -1})
	}
	traffic := decodeData(t, steps)
	split := Evaluate(res.Model, traffic, 0).Overall
	one := DefaultKindSpecs[1]
	one.Regimes = ""
	single, err := FitRecipe(decodeData(t, raggedGrid(splitKernel, 1)), RecipeOptions{Seed: 1, Kinds: []KindSpec{one}})
	require.NoError(t, err)
	flat := Evaluate(single.Model, traffic, 0).Overall
	t.Logf("ragged steps off the grid: MAPE %.2f%% with regimes, %.2f%% with one linear form", split.MAPE, flat.MAPE)
	require.Less(t, split.MAPE, 2.0)
	require.Greater(t, flat.MAPE, 2*split.MAPE)

	// One regime in the data: no bound cuts the error significantly.
	oneRegime := func(b, longest, kv float64) float64 { return 6e6 + 2e4*b + 1500*longest + 10*kv }
	res, err = FitRecipe(decodeData(t, raggedGrid(oneRegime, 2)), RecipeOptions{Seed: 1})
	require.NoError(t, err)
	k = res.Model.Kind(datasets.KindDecode)
	require.Nil(t, k.Regimes)
	require.NotEmpty(t, k.Terms)
}

func TestRegimeCandidates(t *testing.T) {
	require.Nil(t, regimeCandidates([]float64{4, 4, 4}, 0.02), "one value: nothing to split")
	require.Equal(t, []float64{1, 2, 101}, regimeCandidates([]float64{1, 2, 2, 100, 101, 128}, 0.02),
		"the largest value of each snapped cluster, but the last")
	many := make([]float64, 500)
	for i := range many {
		many[i] = float64(i + 1)
	}
	c := regimeCandidates(many, 0)
	require.Len(t, c, maxRegimeCandidates)
	require.Equal(t, 1.0, c[0])
}

func TestBuildTableLeavesOffGridLines(t *testing.T) {
	// The ragged grid's uniform points, plus uniform batches at a batch
	// size and a context of their own: the table is the grid's lines.
	steps := raggedGrid(splitKernel, 3)
	for _, b := range []int{3, 12} {
		for _, ctx := range []int{300, 1000} {
			kv := int64(b * ctx)
			steps = append(steps, datasets.Step{StepID: int64(len(steps)), Kind: datasets.KindDecode, Role: datasets.RoleMeasured, Valid: true,
				BenchmarkID: int64(len(steps)), NumDecodeRequests: int32(b), SumDecodeKVTokens: kv, MaxDecodeKVTokens: int64(ctx),
				TotalScheduledTokens: int64(b), WallTimeNs: int64(splitKernel(float64(b), float64(ctx), float64(kv))), GPUTimeNs: -1})
		}
	}
	d := decodeData(t, steps)
	idx := make([]int, d.Len())
	for i := range idx {
		idx[i] = i
	}
	tb, st, err := BuildTable(d, idx, DefaultKindSpecs[1].Coords, 0.02, 1)
	require.NoError(t, err)
	require.NotNil(t, tb, "%s", st.Reason)
	require.Equal(t, []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}, tb.Axes[0].Nodes)
	require.Equal(t, []float64{128, 512, 2048}, tb.Axes[1].Nodes)
	require.Equal(t, fpm.TableAxis{Coord: fpm.CoordKVMaxRatio, Nodes: []float64{1}}, tb.Axes[2])
	require.Equal(t, 27, st.Rows, "the uniform grid points")
	require.Equal(t, d.Len()-27, st.OffGrid, "the ragged points, and the uniform ones off the grid's lines")
	require.Zero(t, st.Missing)

	_, _, err = BuildTable(d, idx, []string{fpm.TermDecodeRequests, "kv_max_ratio=one"}, 0.02, 1)
	require.ErrorContains(t, err, "NAME=NUMBER")
	_, st, err = BuildTable(d, idx, []string{fpm.TermDecodeRequests, "kv_max_ratio=9"}, 0.02, 1)
	require.NoError(t, err)
	require.Equal(t, "no rows meet the table's conditions", st.Reason)
}

// TestFitRecipeKnownBounds: bounds known before the search (KindSpec.Bounds,
// and Data.GraphTokens on scheduled_tokens) are kept whatever the held-out
// error, and the search adds the data's own; with the held-out error
// averaged over regimeRepeats fold assignments, the bound the data has is
// found whatever the seed.
func TestFitRecipeKnownBounds(t *testing.T) {
	oneRegime := func(b, longest, kv float64) float64 { return 6e6 + 2e4*b + 1500*longest + 10*kv }
	known := DefaultKindSpecs[1]
	known.Bounds = []float64{64}
	res, err := FitRecipe(decodeData(t, raggedGrid(oneRegime, 2)), RecipeOptions{Seed: 1, Kinds: []KindSpec{known}})
	require.NoError(t, err)
	require.Equal(t, []float64{64}, res.Model.Kind(datasets.KindDecode).Regimes.Upper, "kept though one form would do")

	known.Bounds = []float64{8}
	res, err = FitRecipe(decodeData(t, raggedGrid(splitKernel, 1)), RecipeOptions{Seed: 1, Kinds: []KindSpec{known}})
	require.NoError(t, err)
	require.Equal(t, []float64{8, 32}, res.Model.Kind(datasets.KindDecode).Regimes.Upper, "the data's bound added to the known one")

	known.Bounds = []float64{128} // above it only B=256: 9 rows, too few for a piece
	res, err = FitRecipe(decodeData(t, raggedGrid(splitKernel, 1)), RecipeOptions{Seed: 1, Kinds: []KindSpec{known}})
	require.NoError(t, err)
	require.Equal(t, []float64{32}, res.Model.Kind(datasets.KindDecode).Regimes.Upper, "a bound the rows cannot fit is dropped")

	tokens := DefaultKindSpecs[1]
	tokens.Regimes = fpm.CoordScheduledTokens // a decode step's tokens are its requests
	d := decodeData(t, raggedGrid(oneRegime, 2))
	d.GraphTokens = 64
	res, err = FitRecipe(d, RecipeOptions{Seed: 1, Kinds: []KindSpec{tokens}})
	require.NoError(t, err)
	require.Equal(t, []float64{64}, res.Model.Kind(datasets.KindDecode).Regimes.Upper, "the engine's largest CUDA graph")

	for seed := range uint64(5) {
		res, err := FitRecipe(decodeData(t, raggedGrid(splitKernel, 1)), RecipeOptions{Seed: seed, SkipResiduals: true})
		require.NoError(t, err)
		require.Equal(t, []float64{32}, res.Model.Kind(datasets.KindDecode).Regimes.Upper, "seed %d", seed)
	}
}
