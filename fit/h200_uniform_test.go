package fit

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
)

// h200Grids are the grids with an admission-step twin, each with the
// traffic of its shape: the three shapes' steady grids, and the first
// Llama captures (a uniform grid) with theirs.
var h200Grids = append(slices.Clone(h200Shapes),
	h200Shape{"Llama-3.1-8B (first captures)", "bench-steady", []string{"traffic-azure-5rps", "traffic-azure-12rps"}, true})

// h200UniformGrids are every committed steady grid: h200Grids and the
// later worker generations' (fused, piecewise), each with its traffic;
// admission says whether its admission-step twin is fitted and gated too.
func h200UniformGrids() []struct {
	h200Shape
	gen       string
	admission bool
} {
	type grid = struct {
		h200Shape
		gen       string
		admission bool
	}
	var out []grid
	for _, sh := range h200Grids {
		out = append(out, grid{sh, "", true})
	}
	for _, g := range []h200Gen{h200Fused, h200Piecewise} {
		for _, sh := range g.shapes() {
			out = append(out, grid{sh.h200Shape, g.dir, false})
		}
	}
	return out
}

// TestH200Uniform fits the default recipe on the uniform points only
// (Selection.Uniform: what Dynamo's and AIConfigurator's B × context grids
// record) of every committed steady grid (and the admission-step twins of
// the first generations), and prices the shape's traffic, which the fit
// never saw; beside it the whole steady grid. checks.yaml gates each
// uniform fit's figures (a check of fit uniform: true on that grid and
// policy): this test says which grids the gate must cover and logs the
// table docs/fitting.md quotes.
func TestH200Uniform(t *testing.T) {
	bf, err := LoadBounds("../checks.yaml")
	require.NoError(t, err)
	gated := map[string]bool{}
	for _, c := range bf.Checks {
		if f := c.Model.Fit; f != nil && f.Uniform && len(f.Datasets) == 1 {
			gated[f.Datasets[0]+" "+cmp.Or(f.Policy, PolicyAuto)+" "+f.Target] = true
		}
	}
	for _, sh := range h200UniformGrids() {
		for _, target := range []string{TargetWall, TargetGPU} {
			traffic := h200Data(t, target, Selection{}, sh.traffic...).Data
			fits := []struct {
				policy  string
				bench   string
				uniform bool
			}{{PolicyAuto, sh.bench, true}, {PolicyAuto, sh.bench, false}}
			if sh.admission {
				fits = append(fits, struct {
					policy  string
					bench   string
					uniform bool
				}{datasets.PolicyAdmissionStep, strings.Replace(sh.bench, "bench-steady", "bench-admission", 1), true})
			}
			for _, grid := range fits {
				path := filepath.ToSlash(filepath.Join("datasets/h200", grid.bench))
				if grid.uniform {
					require.True(t, gated[path+" "+grid.policy+" "+target], "checks.yaml gates a uniform fit of %s (policy %s, %s)", path, grid.policy, target)
				}
				l, err := LoadDatasets(h200Paths(grid.bench), LoadOptions{Target: target, Selection: Selection{Uniform: grid.uniform}, Policy: grid.policy})
				require.NoError(t, err)
				res, err := FitRecipe(l.Data, RecipeOptions{Seed: 1, SkipResiduals: true})
				require.NoError(t, err)
				dk := res.Kinds[slices.IndexFunc(res.Kinds, func(k KindReport) bool { return k.Kind == datasets.KindDecode })]
				require.Len(t, dk.Identified, 2, "the decode kind says where its attention wave and its kernel's split rule came from")
				if grid.uniform || sh.bench == "bench-steady" {
					require.Contains(t, dk.Identified[0], "assumed (the hardware catalogue's attn_programs_per_sm")
					require.Contains(t, dk.Identified[0], "not identified: 0 ragged decode rows")
					require.Contains(t, dk.Identified[0], "ragged decode points", "it names the points that would identify it")
					require.Equal(t, []string{fpm.TermDecodeKVTokens, fpm.TermDecodeBatchMaxKV}, droppedTerms(dk)[:2], "terms only ragged points identify")
				} else {
					require.Contains(t, dk.Identified[0], "identified by 72 ragged decode rows")
				}
				require.Contains(t, dk.Identified[1], "the gpu-worker's rule before captures recorded it", "the committed captures predate the recorded rule")
				mk := res.Kinds[slices.IndexFunc(res.Kinds, func(k KindReport) bool { return k.Kind == datasets.KindMixed })]
				if grid.uniform {
					// The first captures' grid has no chunk at a context: it
					// cannot say how fast the decode rows walk their KV.
					require.Equal(t, PricedComposed, mk.PricedBy)
					require.Len(t, mk.Identified, 1)
					want := "identified by 10 prefill rows at a context"
					if sh.bench == "bench-steady" {
						want = "not priced (0 prefill rows read a context"
					}
					require.Contains(t, mk.Identified[0], want)
				}
				r := Evaluate(res.Model, traffic, 0)
				dec, mix := r.ByKind[datasets.KindDecode], r.ByKind[datasets.KindMixed]
				t.Logf("%-9s %-30s %-12s %-24s uniform=%-5v rows %4d | decode MAPE %5.2f%% p90 %5.2f%% bias %+6.2f%% | mixed MAPE %5.2f%% bias %+6.2f%% | all %5.2f%%",
					sh.gen, sh.name, target, l.Policy, grid.uniform, l.Data.Len(), dec.MAPE, dec.P90APE, dec.MeanBias, mix.MAPE, mix.MeanBias, r.Overall.MAPE)
			}
		}
	}
}

// TestH200AttnPerSM measures the H200 catalogue's attn_programs_per_sm
// (of its attn_kv_tile_tokens): fitted on each grid's uniform points,
// which cannot tell, the default recipe prices the grids' ragged decode
// points (never traffic) best at the catalogue's figure, on the mean over
// every grid with them (three shapes, two kernel generations of 32-token
// tiles and one of 64, and the mixture of experts) and both timings.
func TestH200AttnPerSM(t *testing.T) {
	ratio, err := fpm.Coord(fpm.CoordKVMaxRatio)
	require.NoError(t, err)
	catalogue := 0
	mean := make([]float64, len(AttnPerSMCandidates))
	n := 0
	for _, sh := range h200UniformGrids() {
		if sh.bench == "bench-steady" {
			continue // the first captures: no ragged points
		}
		for _, target := range []string{TargetGPU, TargetWall} {
			full := h200Data(t, target, Selection{}, sh.bench).Data
			var ragged []int
			for i, f := range full.Features {
				if full.Kind(i) == datasets.KindDecode && ratio(f) > 1.02 {
					ragged = append(ragged, i)
				}
			}
			require.NotEmpty(t, ragged, sh.name)
			grid := h200Data(t, target, Selection{Uniform: true}, sh.bench).Data
			catalogue = grid.AttnPerSM
			line := fmt.Sprintf("%-9s %-22s %-12s %d ragged points, MAPE by programs per SM of %d-token tiles (the kernel's %d):",
				sh.gen, sh.name, target, len(ragged), grid.AttnTile, grid.Kernel.TileTokens)
			for j, c := range AttnPerSMCandidates {
				grid.AttnPerSM = c
				res, err := FitRecipe(grid, RecipeOptions{Seed: 1, SkipResiduals: true})
				require.NoError(t, err)
				m := Evaluate(res.Model, full.Subset(ragged), 0).Overall
				mean[j] += m.MAPE
				line += fmt.Sprintf(" %d: %.2f%%", c, m.MAPE)
			}
			n++
			t.Log(line)
		}
	}
	best := 0
	for j := range mean {
		mean[j] /= float64(n)
		if mean[j] < mean[best] {
			best = j
		}
	}
	t.Logf("mean over %d grids and timings: %v", n, mean)
	require.Equal(t, catalogue, AttnPerSMCandidates[best], "the ragged points' choice is the catalogue's")
}

// TestH200UniformMixed: mixed steps composed from a dense grid's uniform
// points, on device time. The decode rows' KV walk (fpm.Compose.DecodeWalk,
// identified by the grid's chunks at a context) prices the traffic's
// mixed steps better than the decode form's reads alone on every shape
// and generation. What it leaves: a step that replays a CUDA graph of a
// size no uniform prefill point ran (the graph's GEMMs run at its padded
// size, whose cost the grid's sizes do not interpolate) is priced lower
// than the steps at a measured size or run eagerly. docs/fitting.md quotes
// the table this logs.
func TestH200UniformMixed(t *testing.T) {
	for _, sh := range h200UniformGrids() {
		if sh.bench == "bench-steady" || strings.Contains(sh.bench, "qwen3-30b-a3b") {
			continue // no chunk at a context; a mixture of experts (its eager prefill points scatter)
		}
		grid := h200Data(t, TargetGPU, Selection{Uniform: true}, sh.bench)
		sizes := map[int32]bool{}
		for _, st := range grid.Steps {
			if st.Kind == datasets.KindPrefill && st.CUDAGraphSize > 0 {
				sizes[st.CUDAGraphSize] = true
			}
		}
		res, err := FitRecipe(grid.Data, RecipeOptions{Seed: 1, SkipResiduals: true})
		require.NoError(t, err)
		traffic := h200Data(t, TargetGPU, Selection{Kinds: []string{datasets.KindMixed}}, sh.traffic...)
		var measured, unmeasured []int
		for i, st := range traffic.Steps {
			if st.CUDAGraphSize > 0 && !sizes[st.CUDAGraphSize] {
				unmeasured = append(unmeasured, i)
			} else {
				measured = append(measured, i)
			}
		}
		m := res.Model
		walk := Evaluate(m, traffic.Data, 0).Overall
		at, off := Evaluate(m, traffic.Data.Subset(measured), 0).Overall, Evaluate(m, traffic.Data.Subset(unmeasured), 0).Overall
		m.Kind(datasets.KindMixed).Compose.DecodeWalk = false
		require.NoError(t, m.Validate())
		reads := Evaluate(m, traffic.Data, 0).Overall
		t.Logf("%-9s %-22s mixed MAPE %5.2f%% (reads alone %5.2f%%) | at a measured graph size or eager: %3d steps, MAPE %5.2f%% bias %+6.2f%% | other graph sizes: %3d steps, MAPE %5.2f%% bias %+6.2f%%",
			sh.gen, sh.name, walk.MAPE, reads.MAPE, at.Count, at.MAPE, at.MeanBias, off.Count, off.MAPE, off.MeanBias)
		require.Less(t, walk.MAPE, reads.MAPE, "%s %s: the walk prices the decode rows", sh.gen, sh.name)
		require.Less(t, off.MeanBias, at.MeanBias, "%s %s: unmeasured graph sizes cost more than the grid interpolates", sh.gen, sh.name)
	}
}

func droppedTerms(k KindReport) []string {
	var out []string
	for _, d := range k.Dropped {
		out = append(out, d.Term)
	}
	return out
}
