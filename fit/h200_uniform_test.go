package fit

import (
	"cmp"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
)

// h200Grids are every committed grid with the traffic of its shape: the
// three shapes' steady grids, and the first Llama captures (a uniform
// grid) with theirs. Each has an admission-step twin beside it.
var h200Grids = append(slices.Clone(h200Shapes),
	h200Shape{"Llama-3.1-8B (first captures)", "bench-steady", []string{"traffic-azure-5rps", "traffic-azure-12rps"}, true})

// TestH200Uniform fits the default recipe on the uniform points only
// (Selection.Uniform: what Dynamo's and AIConfigurator's B × context grids
// record) of every committed grid, each measurement policy, and prices the
// shape's traffic, which the fit never saw; beside it the whole steady
// grid. checks.yaml gates each uniform fit's figures (a check of fit
// uniform: true on that grid and policy): this test says which grids the
// gate must cover and logs the table docs/fitting.md quotes.
func TestH200Uniform(t *testing.T) {
	bf, err := LoadBounds("../checks.yaml")
	require.NoError(t, err)
	gated := map[string]bool{}
	for _, c := range bf.Checks {
		if f := c.Model.Fit; f != nil && f.Uniform && len(f.Datasets) == 1 {
			gated[f.Datasets[0]+" "+cmp.Or(f.Policy, PolicyAuto)+" "+f.Target] = true
		}
	}
	for _, sh := range h200Grids {
		for _, target := range []string{TargetWall, TargetGPU} {
			traffic := h200Data(t, target, Selection{}, sh.traffic...).Data
			for _, grid := range []struct {
				policy  string
				bench   string
				uniform bool
			}{
				{PolicyAuto, sh.bench, true},
				{datasets.PolicyAdmissionStep, strings.Replace(sh.bench, "bench-steady", "bench-admission", 1), true},
				{PolicyAuto, sh.bench, false},
			} {
				path := filepath.ToSlash(filepath.Join("datasets/h200", grid.bench))
				if grid.uniform {
					require.True(t, gated[path+" "+grid.policy+" "+target], "checks.yaml gates a uniform fit of %s (policy %s, %s)", path, grid.policy, target)
				}
				l, err := LoadDatasets(h200Paths(grid.bench), LoadOptions{Target: target, Selection: Selection{Uniform: grid.uniform}, Policy: grid.policy})
				require.NoError(t, err)
				res, err := FitRecipe(l.Data, RecipeOptions{Seed: 1, SkipResiduals: true})
				require.NoError(t, err)
				dk := res.Kinds[slices.IndexFunc(res.Kinds, func(k KindReport) bool { return k.Kind == datasets.KindDecode })]
				require.Len(t, dk.Identified, 1, "the decode kind says where its attention wave came from")
				if grid.uniform || sh.bench == "bench-steady" {
					require.Contains(t, dk.Identified[0], "assumed (the hardware catalogue's attn_programs_per_sm), not identified")
					require.Contains(t, dk.Identified[0], "ragged decode points", "it names the points that would identify it")
				} else {
					require.Contains(t, dk.Identified[0], "identified by 72 ragged decode rows")
				}
				r := Evaluate(res.Model, traffic, 0)
				dec, mix := r.ByKind[datasets.KindDecode], r.ByKind[datasets.KindMixed]
				t.Logf("%-30s %-12s %-24s uniform=%-5v rows %4d | decode MAPE %5.2f%% p90 %5.2f%% bias %+6.2f%% | mixed MAPE %5.2f%% | all %5.2f%%",
					sh.name, target, l.Policy, grid.uniform, l.Data.Len(), dec.MAPE, dec.P90APE, dec.MeanBias, mix.MAPE, r.Overall.MAPE)
			}
		}
	}
}

// TestH200AttnPerSM measures the H200 catalogue's attn_programs_per_sm:
// fitted on each grid's uniform points, which cannot tell, the default
// recipe prices that grid's ragged decode points (never traffic) best at
// the catalogue's figure, on every shape and timing.
func TestH200AttnPerSM(t *testing.T) {
	ratio, err := fpm.Coord(fpm.CoordKVMaxRatio)
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
