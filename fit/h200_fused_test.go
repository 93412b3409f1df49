package fit

import (
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
)

// The third worker generation (datasets/h200/fused): the worker with
// fused Triton element-wise kernels and a mixture-of-experts MLP, the three
// dense shapes recaptured and Qwen3-30B-A3B added, grids and traffic on one
// H200 machine. docs/h200-ground-truth.md#the-fused-kernel-worker quotes
// what these tests log (go test ./fit -run TestH200Fused -v).

// h200FusedShapes are the generation's shapes; prev names the same
// shape's folder of the generation before (none for the MoE shape).
var h200FusedShapes = []struct {
	h200Shape
	prev string
	moe  bool
}{
	{fusedShape("Llama-3.1-8B", "llama-3.1-8b"), "llama-3.1-8b", false},
	{fusedShape("Mistral-Nemo-Base-2407", "mistral-nemo-base-2407"), "mistral-nemo-base-2407", false},
	{fusedShape("Qwen2.5-7B", "qwen2.5-7b"), "qwen2.5-7b", false},
	{fusedShape("Qwen3-30B-A3B", "qwen3-30b-a3b"), "", true},
}

func fusedShape(name, dir string) h200Shape {
	d := filepath.Join("fused", dir)
	return h200Shape{name, filepath.Join(d, "bench-steady"),
		[]string{filepath.Join(d, "traffic-azure-5rps"), filepath.Join(d, "traffic-azure-12rps")}, true}
}

// h200CopyBandwidth is the device-to-device copy rate measured on the
// capture machine (bytes read plus written per second;
// datasets/h200/fused/logs/profile-decode.log), the memory bound's rate.
const h200CopyBandwidth = 4.249e12

// h200DecodeBound is the memory bound of a decode step of B requests at
// context ctx: the weights it reads plus the KV cache, at the copy rate.
// An MoE reads each expert that at least one of its B tokens is routed to:
// under uniform routing, with probability 1 − (1 − top_k/experts)^B.
func h200DecodeBound(t *testing.T, dir string, b, ctx int) float64 {
	t.Helper()
	m, err := datasets.ReadManifest(filepath.Join(h200Dir, dir))
	require.NoError(t, err)
	w, err := strconv.ParseFloat(m.Source.Detail["weight_bytes"], 64)
	require.NoError(t, err)
	s := m.Model
	kv := float64(2*s.Layers*s.KVHeads*s.HeadDim*2) * float64(b*ctx)
	if e := s.MoE; e != nil {
		experts := float64(s.Layers*e.Experts*3*s.Hidden*e.ExpertIntermediate) * 2
		w -= experts * math.Pow(1-float64(e.TopK)/float64(e.Experts), float64(b))
	}
	return (w + kv) / h200CopyBandwidth * 1e9
}

// TestH200FusedDecode: steady decode at B=1 (ctx 128) and B=256 (ctx
// 1,024), device time and inter-update period, this generation against
// the one before and the memory bound.
func TestH200FusedDecode(t *testing.T) {
	for _, sh := range h200FusedShapes {
		cur := h200Load(t, sh.bench)
		cm := h200Measured(cur)
		for _, p := range []h200Point{{1, 128}, {256, 1024}} {
			s := &cur.steps[cm[p]]
			bound := h200DecodeBound(t, sh.bench, p.B, p.Ctx)
			line := []any{sh.name, p.B, p.Ctx, ms(float64(s.GPUTimeNs)), ms(float64(s.WallTimeNs)), ms(bound), float64(s.GPUTimeNs) / bound}
			if sh.prev == "" {
				t.Logf("%-22s B=%-3d ctx=%-4d gpu %6.2f ms wall %6.2f ms | bound %6.2f ms (%.2fx)", line...)
				continue
			}
			old := h200Load(t, filepath.Join(sh.prev, "bench-steady"))
			o := &old.steps[h200Measured(old)[p]]
			t.Logf("%-22s B=%-3d ctx=%-4d gpu %6.2f ms wall %6.2f ms | bound %6.2f ms (%.2fx) | before: gpu %6.2f wall %6.2f ms",
				append(line, ms(float64(o.GPUTimeNs)), ms(float64(o.WallTimeNs)))...)
			require.Less(t, float64(s.GPUTimeNs), 0.9*float64(o.GPUTimeNs), "%s B=%d: the fused worker is faster", sh.name, p.B)
			require.Less(t, float64(s.WallTimeNs), float64(o.WallTimeNs), "%s B=%d", sh.name, p.B)
			if p.B == 1 {
				// The target: within 1.3x of the weight + KV read.
				require.Less(t, float64(s.GPUTimeNs), 1.3*bound, "%s B=1", sh.name)
			}
		}
	}
}

// TestH200FusedMixed: Llama's mixed steps of under 256 prompt tokens on
// the 5 req/s traffic, device time, before and after the fused kernels.
func TestH200FusedMixed(t *testing.T) {
	small := func(names ...string) []float64 {
		l := h200Data(t, TargetGPU, Selection{Kinds: []string{datasets.KindMixed}}, names...)
		var y []float64
		for i, f := range l.Data.Features {
			if f.PrefillTokens < 256 {
				y = append(y, l.Data.Y[i])
			}
		}
		slices.Sort(y)
		return y
	}
	q := fpm.SortedQuantile
	before := small("llama-3.1-8b/traffic-azure-5rps")
	after := small(h200FusedShapes[0].traffic[0])
	t.Logf("Llama-3.1-8B 5 req/s mixed steps under 256 prompt tokens, device time: before %d steps p10 %.1f p50 %.1f p90 %.1f ms; after %d steps p10 %.1f p50 %.1f p90 %.1f ms",
		len(before), q(before, 0.1)/1e6, q(before, 0.5)/1e6, q(before, 0.9)/1e6, len(after), q(after, 0.1)/1e6, q(after, 0.5)/1e6, q(after, 0.9)/1e6)
	require.Less(t, q(after, 0.5), 0.85*q(before, 0.5))
	require.Less(t, q(after, 0.9)-q(after, 0.1), q(before, 0.9)-q(before, 0.1))
}

// TestH200FusedShapes: the default recipe fitted on each shape's steady
// grid, priced on its two traffic runs (which it never saw), wall and
// device time; the MoE shape included.
func TestH200FusedShapes(t *testing.T) {
	for _, sh := range h200FusedShapes {
		for _, target := range []string{TargetWall, TargetGPU} {
			grid := h200Data(t, target, Selection{}, sh.bench).Data
			traffic := h200Data(t, target, Selection{}, sh.traffic...).Data
			res, err := FitRecipe(grid, RecipeOptions{Bootstrap: 200, Seed: 1})
			require.NoError(t, err)
			r := Evaluate(res.Model, traffic, 0)
			d, m := r.ByKind["decode"], r.ByKind["mixed"]
			t.Logf("%-22s %-12s all MAPE %5.2f%% | decode MAPE %5.2f%% p90 %5.2f%% bias %+5.2f%% | mixed MAPE %5.2f%% p90 %5.2f%%",
				sh.name, target, r.Overall.MAPE, d.MAPE, d.P90APE, d.MeanBias, m.MAPE, m.P90APE)
		}
	}
}

// withoutExperts are the default kinds without the experts-reached term:
// the recipe before it.
func withoutExperts() []KindSpec {
	kinds := slices.Clone(DefaultKindSpecs)
	for i := range kinds {
		kinds[i].Terms = slices.DeleteFunc(slices.Clone(kinds[i].Terms), func(s string) bool { return s == fpm.TermExpertsReached })
	}
	return kinds
}

// TestH200FusedMoE: Qwen3-30B-A3B's recipe with and without the
// experts-reached term, fitted on its grid, priced on its two traffic
// runs; the fitted cost of an expert reached against the memory bound of
// reading its weights; and the experts the traffic's decode steps imply
// against uniform routing. checks.yaml's h200-fused-qwen3-30b-a3b-* gate
// the figures with the term.
func TestH200FusedMoE(t *testing.T) {
	sh := h200FusedShapes[3]
	require.True(t, sh.moe)
	m, err := datasets.ReadManifest(filepath.Join(h200Dir, sh.bench))
	require.NoError(t, err)
	e, s := m.Model.MoE, m.Model
	require.Nil(t, e.RoutingSkew, "these captures predate the recorded routing")
	expertBytes := float64(s.Layers*3*s.Hidden*e.ExpertIntermediate) * 2 // bf16, every layer
	physical := expertBytes / h200CopyBandwidth * 1e9
	routing := catalog.Routing{Experts: e.Experts, TopK: e.TopK}
	for _, target := range []string{TargetWall, TargetGPU} {
		grid := h200Data(t, target, Selection{}, sh.bench).Data
		traffic := h200Data(t, target, Selection{}, sh.traffic...).Data
		require.Equal(t, fpm.ExpertsReached(routing), grid.Experts)
		before, err := FitRecipe(grid, RecipeOptions{Bootstrap: 200, Seed: 1, Kinds: withoutExperts()})
		require.NoError(t, err)
		after, err := FitRecipe(grid, RecipeOptions{Bootstrap: 200, Seed: 1})
		require.NoError(t, err)
		require.Len(t, after.Warnings, 1)
		require.Contains(t, after.Warnings[0], "records no moe.routing_skew")
		rb, ra := Evaluate(before.Model, traffic, 0), Evaluate(after.Model, traffic, 0)
		for _, r := range []struct {
			name string
			rep  Report
		}{{"before", rb}, {"after", ra}} {
			d, mx := r.rep.ByKind["decode"], r.rep.ByKind["mixed"]
			t.Logf("%-12s %-6s decode MAPE %5.2f%% p90 %5.2f%% bias %+5.2f%% | mixed MAPE %5.2f%% p90 %5.2f%%",
				target, r.name, d.MAPE, d.P90APE, d.MeanBias, mx.MAPE, mx.P90APE)
		}
		require.Less(t, ra.ByKind["decode"].MAPE, rb.ByKind["decode"].MAPE-1, "the term prices what the regimes' padded_batch could not")

		k := after.Model.Kind(datasets.KindDecode)
		probe := fpm.Features{DecodeRequests: 16, DecodeKVTokens: 16 * 1024, DecodeMaxKVTokens: 1024, PaddedBatch: 16}
		lin := k.Linear(probe)
		coef := lin.Coef[slices.Index(lin.Terms, grid.Experts)]
		t.Logf("%-12s per expert reached (B=16 regime): fitted %.1f µs, weights read at the copy rate %.1f µs (%.2fx)", target, coef/1e3, physical/1e3, coef/physical)
		require.Greater(t, coef, physical, "no faster than reading the expert's weights")
		require.Less(t, coef, 2*physical)
		if target == TargetGPU {
			impliedExperts(t, traffic, lin, grid.Experts, routing)
		}
	}
}

// impliedExperts logs, per batch size of the traffic's decode steps, the
// experts their measured time implies under the fitted decode form (the
// form's other terms held, the rest put down to experts) against uniform
// routing, and checks that batches of 8 to 64 reach fewer.
func impliedExperts(t *testing.T, traffic *Data, lin *fpm.Linear, term string, r catalog.Routing) {
	t.Helper()
	j := slices.Index(lin.Terms, term)
	byB := map[int][]float64{}
	for i, f := range traffic.Features {
		if traffic.Kind(i) != datasets.KindDecode {
			continue
		}
		fn, err := fpm.Term(term)
		require.NoError(t, err)
		byB[int(f.DecodeRequests)] = append(byB[int(f.DecodeRequests)], (traffic.Y[i]-lin.PredictNs(f))/lin.Coef[j]+fn(f))
	}
	for _, b := range []int{4, 8, 16, 32, 64} { // at B ≤ 3 experts reached and padded_batch are collinear (≈ 8B)
		v := byB[b]
		if len(v) < 5 {
			continue
		}
		slices.Sort(v)
		med, uni := fpm.SortedQuantile(v, 0.5), r.Reached(nil, float64(b))
		t.Logf("traffic decode B=%-3d %4d steps: experts implied %5.1f (median), uniform routing %5.1f", b, len(v), med, uni)
		if b >= 8 {
			require.Less(t, med, 0.85*uni, "B=%d: the traffic's tokens reach fewer experts than uniform routing", b)
		}
	}
}
