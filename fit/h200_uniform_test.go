package fit

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/model"
)

// h200Grids are every committed grid with the traffic of its shape: the
// three shapes' steady grids, and the first Llama captures (a uniform
// grid) with theirs.
var h200Grids = append(slices.Clone(h200Shapes),
	h200Shape{"Llama-3.1-8B (first captures)", "bench-steady", []string{"traffic-azure-5rps", "traffic-azure-12rps"}, true})

// TestH200Uniform fits the default recipe on each committed grid's uniform
// points only (Selection.Uniform: what Dynamo's and AIConfigurator's
// B × context grids record) and on the whole grid, and prices the shape's
// traffic, which neither saw.
func TestH200Uniform(t *testing.T) {
	for _, sh := range h200Grids {
		for _, target := range []string{TargetWall, TargetGPU} {
			traffic := h200Data(t, target, Selection{}, sh.traffic...).Data
			for _, uniform := range []bool{true, false} {
				grid := h200Data(t, target, Selection{Uniform: uniform}, sh.bench).Data
				res, err := FitRecipe(grid, RecipeOptions{Seed: 1, SkipResiduals: true})
				require.NoError(t, err)
				r := Evaluate(res.Model, traffic, 0)
				dec, mix := r.ByKind[datasets.KindDecode], r.ByKind[datasets.KindMixed]
				t.Logf("%-30s %-12s uniform=%-5v rows %4d | decode MAPE %5.2f%% p90 %5.2f%% bias %+6.2f%% | mixed MAPE %5.2f%% | all %5.2f%%",
					sh.name, target, uniform, grid.Len(), dec.MAPE, dec.P90APE, dec.MeanBias, mix.MAPE, r.Overall.MAPE)
				for _, k := range res.Kinds {
					for _, n := range k.Identified {
						t.Logf("    %s", n)
					}
				}
			}
		}
	}
}

// TestH200AttnPerSM measures the H200 catalogue's attn_programs_per_sm:
// fitted on each grid's uniform points, which cannot tell, the default
// recipe prices that grid's ragged decode points (never traffic) best at
// the catalogue's figure, on every shape and timing.
func TestH200AttnPerSM(t *testing.T) {
	ratio, err := model.Coord(model.CoordKVMaxRatio)
	require.NoError(t, err)
	for _, target := range []string{TargetGPU, TargetWall} {
		for _, sh := range h200Shapes {
			full := h200Data(t, target, Selection{}, sh.bench).Data
			var ragged []int
			for i, f := range full.Features {
				if full.Kind(i) == datasets.KindDecode && ratio(f) > 1.02 {
					ragged = append(ragged, i)
				}
			}
			require.NotEmpty(t, ragged, sh.name)
			grid := h200Data(t, target, Selection{Uniform: true}, sh.bench).Data
			catalogue := grid.AttnPerSM
			best, bestMAPE := 0, math.Inf(1)
			for _, c := range AttnPerSMCandidates {
				grid.AttnPerSM = c
				res, err := FitRecipe(grid, RecipeOptions{Seed: 1, SkipResiduals: true})
				require.NoError(t, err)
				m := Evaluate(res.Model, full.Subset(ragged), 0).Overall
				t.Logf("%-12s %-24s %d programs per SM: %d ragged grid points, MAPE %5.2f%% bias %+5.2f%%", target, sh.name, c, m.Count, m.MAPE, m.MeanBias)
				if m.MAPE < bestMAPE {
					best, bestMAPE = c, m.MAPE
				}
			}
			require.Equal(t, catalogue, best, "%s %s: the ragged points' choice is the catalogue's", target, sh.name)
		}
	}
}
