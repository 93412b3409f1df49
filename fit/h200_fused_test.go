package fit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
)

// Worker generations after the first captures, each a folder of
// datasets/h200 with one folder per shape, grids and traffic on one H200
// machine: fused (fused Triton element-wise kernels and a
// mixture-of-experts MLP, Qwen3-30B-A3B added) and piecewise (piecewise
// CUDA graphs for prefill and mixed steps, 64-token decode attention
// tiles). docs/h200-ground-truth.md#the-fused-kernel-worker and
// #piecewise-graphs quote what these tests log
// (go test ./fit -run 'TestH200Fused|TestH200Piecewise' -v).
type h200Gen struct {
	dir, prev string // prev: the generation before ("": the first captures, at the top level)
	// faster: this generation's steady decode beats the one before's (by
	// 10% on device time); its mixed steps' p50 by 15%.
	faster bool
}

var (
	h200Fused     = h200Gen{dir: "fused", faster: true}
	h200Piecewise = h200Gen{dir: "piecewise", prev: "fused"}
)

// h200GenShape is one shape of a generation; prev is the same shape's
// folder in the generation before ("" when it has none).
type h200GenShape struct {
	h200Shape
	prev string
	moe  bool
}

func (g h200Gen) shapes() []h200GenShape {
	var out []h200GenShape
	for _, s := range []struct {
		name, dir string
		moe       bool
	}{
		{"Llama-3.1-8B", "llama-3.1-8b", false},
		{"Mistral-Nemo-Base-2407", "mistral-nemo-base-2407", false},
		{"Qwen2.5-7B", "qwen2.5-7b", false},
		{"Qwen3-30B-A3B", "qwen3-30b-a3b", true},
	} {
		d := filepath.Join(g.dir, s.dir)
		sh := h200GenShape{h200Shape{s.name, filepath.Join(d, "bench-steady"),
			[]string{filepath.Join(d, "traffic-azure-5rps"), filepath.Join(d, "traffic-azure-12rps")}, true}, "", s.moe}
		if g.prev != "" || !s.moe { // the first captures have no MoE shape
			sh.prev = filepath.Join(g.prev, s.dir)
		}
		out = append(out, sh)
	}
	return out
}

// h200Rates are the rates capture/worker/profile_decode.py measured on a
// generation's capture machine (the first row of its
// logs/profile-decode.log): the device-to-device copy rate (bytes read
// plus written per second) and a large bf16 GEMM's FLOP/s. They are what
// this GPU reaches, not its data sheet's 4.8 TB/s and 989 TFLOPS.
func h200Rates(t *testing.T, gen string) (bw, flops float64) {
	t.Helper()
	f, err := os.Open(filepath.Join(h200Dir, gen, "logs", "profile-decode.log"))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		row, ok := strings.CutPrefix(sc.Text(), "row ")
		if !ok {
			continue
		}
		var r struct {
			CopyGBps   float64 `json:"copy_GBps"`
			BF16TFLOPs float64 `json:"bf16_TFLOPs"`
		}
		require.NoError(t, json.Unmarshal([]byte(row), &r))
		require.Positive(t, r.CopyGBps, "the first row of %s/logs/profile-decode.log holds the rates", gen)
		require.Positive(t, r.BF16TFLOPs)
		return r.CopyGBps * 1e9, r.BF16TFLOPs * 1e12
	}
	require.NoError(t, sc.Err())
	t.Fatalf("%s/logs/profile-decode.log has no rates row", gen)
	return 0, 0
}

// h200DecodeBounds are two lower bounds of a decode step of B requests at
// context ctx, from the shape (catalog) and the machine's rates: the
// memory bound, every byte the step must read (the weights its GEMMs
// stream, for an MoE the experts at least one token is routed to under
// uniform routing, and the KV cache; not the embedding table, of which it
// reads B rows) at the copy rate, and the roofline, each of its kernel
// classes at the slower of its FLOPs at the GEMM rate and its bytes at the
// copy rate, summed, since a step's kernels run one after another on one
// stream. The roofline is fpm.Roofline with the machine's rates, every
// efficiency 1 and no fixed cost: the GEMMs (the weights streamed against
// their FLOPs; at B = 256 every dense projection is past the ridge point
// of ~170 FLOP per byte, so the class's max is each GEMM's) and decode
// attention (the KV read against its FLOPs). Element-wise kernels are left
// out of both, which only lowers them.
func h200DecodeBounds(t *testing.T, dir string, b, ctx int, bw, flops float64) (memoryNs float64, roof fpm.RooflineBreakdown) {
	t.Helper()
	m, err := datasets.ReadManifest(filepath.Join(h200Dir, dir))
	require.NoError(t, err)
	s, err := catalog.LookupModel(m.Model.Name)
	require.NoError(t, err)
	hw, err := catalog.LookupHardware("H200")
	require.NoError(t, err)
	hw.MemBandwidthGBs, hw.TFLOPS.BF16 = bw/1e9, flops/1e12
	one := catalog.Flat(1)
	r := fpm.Roofline{HW: hw, Shape: s, RooflineParams: catalog.RooflineParams{Basis: "measured rates", // no FixedNs: not one Validate accepts
		GEMMEff: one, AttnEff: one, WeightBWEff: one, KVBWEff: one, AllReduceEff: one}}
	roof = r.Breakdown(fpm.Features{DecodeRequests: float64(b), DecodeKVTokens: float64(b * ctx),
		DecodeMaxKVTokens: float64(ctx), PaddedBatch: float64(b)})
	return roof.WeightStreamNs + float64(s.KVBytesPerToken())*float64(b*ctx)/bw*1e9, roof
}

func TestH200FusedDecode(t *testing.T)     { testH200GenDecode(t, h200Fused) }
func TestH200PiecewiseDecode(t *testing.T) { testH200GenDecode(t, h200Piecewise) }
func TestH200FusedMixed(t *testing.T)      { testH200GenMixed(t, h200Fused) }
func TestH200PiecewiseMixed(t *testing.T)  { testH200GenMixed(t, h200Piecewise) }
func TestH200FusedShapes(t *testing.T)     { testH200GenShapes(t, h200Fused) }
func TestH200PiecewiseShapes(t *testing.T) { testH200GenShapes(t, h200Piecewise) }

// testH200GenDecode: steady decode at B=1 (ctx 128) and B=256 (ctx
// 1,024), device time and inter-update period, the generation against the
// one before, the memory bound and the roofline. The targets, on the
// dense shapes: within 1.3x of the weight + KV read at B=1, where the
// GEMMs are memory-bound and the two bounds agree, and within 1.3x of the
// roofline at B=256, where the GEMMs are compute-bound.
func testH200GenDecode(t *testing.T, g h200Gen) {
	bw, flops := h200Rates(t, g.dir)
	for _, sh := range g.shapes() {
		cur := h200Load(t, sh.bench)
		cm := h200Measured(cur)
		for _, p := range []h200Point{{1, 128}, {256, 1024}} {
			s := &cur.steps[cm[p]]
			gpu := float64(s.GPUTimeNs)
			bound, roof := h200DecodeBounds(t, sh.bench, p.B, p.Ctx, bw, flops)
			line := fmt.Sprintf("%-22s B=%-3d ctx=%-4d gpu %6.2f ms wall %6.2f ms | memory bound %6.2f ms (%.2fx) | roofline %6.2f ms (%.2fx: GEMMs %.2f %s-bound, attention %.2f)",
				sh.name, p.B, p.Ctx, ms(gpu), ms(float64(s.WallTimeNs)), ms(bound), gpu/bound,
				ms(roof.TotalNs), gpu/roof.TotalNs, ms(roof.GEMMNs), roof.GEMMBound, ms(roof.DecodeAttnNs))
			if !sh.moe {
				if p.B == 1 {
					// The 1.3x target is met by the fused captures and missed
					// by 2-7% by the piecewise ones (docs/h200-ground-truth.md
					// says where the time goes); 1.4x catches a regression.
					require.Less(t, gpu, 1.4*bound, "%s B=1", sh.name)
					if gpu >= 1.3*bound {
						line += " | misses the 1.3x target"
					}
				} else {
					require.Equal(t, "compute", roof.GEMMBound, "%s B=%d", sh.name, p.B)
					require.Less(t, gpu, 1.3*roof.TotalNs, "%s B=%d", sh.name, p.B)
				}
			}
			if sh.prev == "" {
				t.Log(line)
				continue
			}
			old := h200Load(t, filepath.Join(sh.prev, "bench-steady"))
			o := &old.steps[h200Measured(old)[p]]
			t.Logf("%s | before: gpu %6.2f wall %6.2f ms", line, ms(float64(o.GPUTimeNs)), ms(float64(o.WallTimeNs)))
			if g.faster {
				require.Less(t, gpu, 0.9*float64(o.GPUTimeNs), "%s B=%d: faster than the generation before", sh.name, p.B)
				require.Less(t, float64(s.WallTimeNs), float64(o.WallTimeNs), "%s B=%d", sh.name, p.B)
			}
		}
	}
}

// testH200GenMixed: Llama's mixed steps of under 256 prompt tokens on the
// 5 req/s traffic, device time, the generation against the one before.
func testH200GenMixed(t *testing.T, g h200Gen) {
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
	llama := g.shapes()[0]
	before := small(filepath.Join(llama.prev, "traffic-azure-5rps"))
	after := small(llama.traffic[0])
	t.Logf("Llama-3.1-8B 5 req/s mixed steps under 256 prompt tokens, device time: before %d steps p10 %.1f p50 %.1f p90 %.1f ms; after %d steps p10 %.1f p50 %.1f p90 %.1f ms",
		len(before), q(before, 0.1)/1e6, q(before, 0.5)/1e6, q(before, 0.9)/1e6, len(after), q(after, 0.1)/1e6, q(after, 0.5)/1e6, q(after, 0.9)/1e6)
	if g.faster {
		require.Less(t, q(after, 0.5), 0.85*q(before, 0.5))
		require.Less(t, q(after, 0.9)-q(after, 0.1), q(before, 0.9)-q(before, 0.1))
		return
	}
	// Piecewise graphs replay what a full mixed graph did for these steps
	// (the same GEMMs, attention on the step's own rows): within 10%.
	require.InEpsilon(t, q(before, 0.5), q(after, 0.5), 0.1)
}

// testH200GenShapes: the default recipe fitted on each shape's steady
// grid, priced on its two traffic runs (which it never saw), wall and
// device time; the MoE shape included.
func testH200GenShapes(t *testing.T, g h200Gen) {
	for _, sh := range g.shapes() {
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

// TestH200FusedMoE: Qwen3-30B-A3B's recipe with and without the
// experts-reached term (ExpertsKindSpecs against the default), fitted on
// its grid, priced on its two traffic runs, on both generations; the
// fitted cost of an expert reached against the memory bound of reading
// its weights; and the experts the fused traffic's decode steps imply
// against uniform routing. The term helps the fused generation and hurts
// the piecewise one, which is why it is not the default.
func TestH200FusedMoE(t *testing.T) {
	for _, gen := range []h200Gen{h200Fused, h200Piecewise} {
		sh := gen.shapes()[3]
		require.True(t, sh.moe)
		m, err := datasets.ReadManifest(filepath.Join(h200Dir, sh.bench))
		require.NoError(t, err)
		e, s := m.Model.MoE, m.Model
		require.Nil(t, e.RoutingSkew, "these captures predate the recorded routing")
		expertBytes := float64(s.Layers*3*s.Hidden*e.ExpertIntermediate) * 2 // bf16, every layer
		bw, _ := h200Rates(t, gen.dir)
		physical := expertBytes / bw * 1e9
		routing := catalog.Routing{Experts: e.Experts, TopK: e.TopK}
		for _, target := range []string{TargetWall, TargetGPU} {
			grid := h200Data(t, target, Selection{}, sh.bench).Data
			traffic := h200Data(t, target, Selection{}, sh.traffic...).Data
			require.Equal(t, fpm.ExpertsReached(routing), grid.Experts)
			before, err := FitRecipe(grid, RecipeOptions{Bootstrap: 200, Seed: 1})
			require.NoError(t, err)
			after, err := FitRecipe(grid, RecipeOptions{Bootstrap: 200, Seed: 1, Kinds: ExpertsKindSpecs()})
			require.NoError(t, err)
			require.Len(t, after.Warnings, 1)
			require.Contains(t, after.Warnings[0], "records no moe.routing_skew")
			rb, ra := Evaluate(before.Model, traffic, 0), Evaluate(after.Model, traffic, 0)
			for _, r := range []struct {
				name string
				rep  Report
			}{{"default", rb}, {"experts", ra}} {
				d, mx := r.rep.ByKind["decode"], r.rep.ByKind["mixed"]
				t.Logf("%-9s %-12s %-7s decode MAPE %5.2f%% p90 %5.2f%% bias %+5.2f%% | mixed MAPE %5.2f%% p90 %5.2f%%",
					gen.dir, target, r.name, d.MAPE, d.P90APE, d.MeanBias, mx.MAPE, mx.P90APE)
			}
			if gen == h200Fused {
				require.Less(t, ra.ByKind["decode"].MAPE, rb.ByKind["decode"].MAPE-1, "fused: the term prices what the regimes' padded_batch could not")
			} else {
				require.Greater(t, ra.ByKind["decode"].P90APE, rb.ByKind["decode"].P90APE, "piecewise: the term's tail is worse (why it is not the default)")
			}
			k := after.Model.Kind(datasets.KindDecode)
			probe := fpm.Features{DecodeRequests: 16, DecodeKVTokens: 16 * 1024, DecodeMaxKVTokens: 1024, PaddedBatch: 16}
			lin := k.Linear(probe)
			coef := lin.Coef[slices.Index(lin.Terms, grid.Experts)]
			t.Logf("%-9s %-12s per expert reached (B=16 regime): fitted %.1f µs, weights read at the copy rate %.1f µs (%.2fx)",
				gen.dir, target, coef/1e3, physical/1e3, coef/physical)
			require.Greater(t, coef, physical, "no faster than reading the expert's weights")
			require.Less(t, coef, 2*physical)
			if target == TargetGPU && gen == h200Fused {
				impliedExperts(t, traffic, lin, grid.Experts, routing)
			}
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
