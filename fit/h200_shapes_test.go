package fit

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/fpm/opdb"
)

// Issue 14's targets on the three committed shapes: the default recipe
// fitted on each shape's steady grid only (its ragged and mixed points
// included), priced on that shape's two traffic runs, which it never saw.
// docs/h200-ground-truth.md quotes the tables these tests log
// (go test ./fit -run TestH200Shapes -v); checks.yaml gates the default
// recipe's figures.

// h200Shape is one committed shape: its steady grid and its traffic runs.
type h200Shape struct {
	name    string
	bench   string
	traffic []string
	// sameMachine: the grid and the traffic ran on one GPU and host (the
	// manifests' GPU UUIDs), so the host time a recipe learns from the
	// grid is the traffic's.
	sameMachine bool
}

// h200Shapes: grids and traffic captured on 2026-12-01 with the worker
// that replays CUDA graphs for prefill and mixed steps, the grids on one
// H200 machine and the traffic on another.
var h200Shapes = []h200Shape{
	{"Llama-3.1-8B", "llama-3.1-8b/bench-steady", []string{"llama-3.1-8b/traffic-azure-5rps", "llama-3.1-8b/traffic-azure-12rps"}, false},
	{"Mistral-Nemo-Base-2407", "mistral-nemo-base-2407/bench-steady",
		[]string{"mistral-nemo-base-2407/traffic-azure-5rps", "mistral-nemo-base-2407/traffic-azure-12rps"}, false},
	{"Qwen2.5-7B", "qwen2.5-7b/bench-steady", []string{"qwen2.5-7b/traffic-azure-5rps", "qwen2.5-7b/traffic-azure-12rps"}, false},
}

func h200Paths(names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = filepath.Join(h200Dir, n)
	}
	return out
}

// h200Load loads the selected rows of datasets under h200Dir.
func h200Data(t *testing.T, target string, sel Selection, names ...string) *Loaded {
	t.Helper()
	l, err := LoadDatasets(h200Paths(names...), LoadOptions{Target: target, Selection: sel, KeepSteps: true})
	require.NoError(t, err)
	return l
}

// h200Forms are the decode forms compared, each as the recipe's decode
// kind (the prefill and mixed kinds are the default ones).
var h200Forms = []struct {
	name   string
	decode KindSpec
}{
	{"grid terms (const, decode_requests, decode_kv_tokens)", KindSpec{Kind: datasets.KindDecode,
		Coords: DefaultKindSpecs[1].Coords, Terms: DecodeTerms}},
	{"ragged terms, one form", KindSpec{Kind: datasets.KindDecode,
		Coords: DefaultKindSpecs[1].Coords, Terms: RaggedDecodeTerms, Relative: true}},
	{"ragged terms, batch regimes (default)", DefaultKindSpecs[1]},
}

func kindSpecsWith(decode KindSpec) []KindSpec {
	out := slices.Clone(DefaultKindSpecs)
	out[1] = decode
	return out
}

// h200ShapeFigures is what TestH200Shapes measures of one shape, target
// and decode form.
type h200ShapeFigures struct {
	decode, mixed       Metrics
	covDecode, covMixed float64
}

func TestH200Shapes(t *testing.T) {
	for _, sh := range h200Shapes {
		for _, target := range []string{TargetWall, TargetGPU} {
			grid := h200Data(t, target, Selection{}, sh.bench).Data
			traffic := h200Data(t, target, Selection{}, sh.traffic...).Data
			got := map[string]h200ShapeFigures{}
			for _, f := range h200Forms {
				res, err := FitRecipe(grid, RecipeOptions{Kinds: kindSpecsWith(f.decode), Bootstrap: 200, Seed: 1})
				require.NoError(t, err)
				r := Evaluate(res.Model, traffic, 0)
				iv := EvaluateIntervals(res.Model, traffic, 0.9)
				fig := h200ShapeFigures{r.ByKind["decode"], r.ByKind["mixed"], iv.ByKind["decode"].Pct, iv.ByKind["mixed"].Pct}
				got[f.name] = fig
				t.Logf("%-22s %-12s %-52s decode MAPE %5.2f%% p90 %5.2f%% bias %+5.2f%% | mixed MAPE %5.2f%% | 90%% coverage decode %5.1f%% mixed %5.1f%%",
					sh.name, target, f.name, fig.decode.MAPE, fig.decode.P90APE, fig.decode.MeanBias, fig.mixed.MAPE, fig.covDecode, fig.covMixed)
				if f.decode.Regimes != "" {
					dk := res.Model.Kind(datasets.KindDecode)
					mk := res.Kinds[slices.IndexFunc(res.Kinds, func(k KindReport) bool { return k.Kind == datasets.KindMixed })]
					t.Logf("%-22s %-12s   regimes %s <= %v; mixed %s: %s", sh.name, target, dk.Regimes.Coord, dk.Regimes.Upper, mk.PricedBy, mk.Note)
				}
			}
			def := got[h200Forms[2].name]
			oneForm := got[h200Forms[1].name].decode
			require.Less(t, oneForm.MAPE, got[h200Forms[0].name].decode.MAPE, "%s %s: the ragged terms beat the grid's", sh.name, target)
			// The regimes are chosen on the grid alone (fit.RegimeZ).
			require.Less(t, def.decode.MAPE, oneForm.MAPE, "%s %s: the regimes beat one form", sh.name, target)
			require.Less(t, def.decode.P90APE, oneForm.P90APE, "%s %s: the regimes beat one form", sh.name, target)
			// Issue 14's targets, on wall and device time: decode MAPE 3%
			// and p90 6%, mixed MAPE 5%. Where grid and traffic share a
			// machine the wall-time bias is under 1.25%: the grid's host
			// time is the traffic's (TestH200GridHost).
			if target == TargetWall && sh.sameMachine {
				require.Less(t, math.Abs(def.decode.MeanBias), 1.25, "%s %s", sh.name, target)
			}
			require.LessOrEqual(t, def.decode.MAPE, 3.0, "%s %s", sh.name, target)
			require.LessOrEqual(t, def.decode.P90APE, 6.0, "%s %s", sh.name, target)
			require.LessOrEqual(t, def.mixed.MAPE, 5.0, "%s %s", sh.name, target)
		}
	}
}

// TestH200ShapesCalibrated: the default recipe's 90% intervals on held-out
// traffic, from the grid's residuals and calibrated on half 1 of the
// traffic steps (tested on half 2).
func TestH200ShapesCalibrated(t *testing.T) {
	for _, sh := range h200Shapes {
		for _, target := range []string{TargetWall, TargetGPU} {
			cfg := FitConfig{Load: LoadOptions{Target: target}, Recipe: RecipeOptions{Bootstrap: 200}, Seed: 1,
				Calibrate: h200Paths(sh.traffic...), CalibrateHalf: 1}
			_, art, _, err := FitDatasets(h200Paths(sh.bench), cfg)
			require.NoError(t, err)
			half2 := h200Data(t, target, Selection{Half: 2}, sh.traffic...).Data
			iv := EvaluateIntervals(art.Recipe, half2, 0.9)
			t.Logf("%-22s %-12s calibrated on half 1, tested on half 2: all %5.1f%% decode %5.1f%% (width %4.1f%%) mixed %5.1f%% (width %4.1f%%)", sh.name, target,
				iv.Overall.Pct, iv.ByKind["decode"].Pct, iv.ByKind["decode"].MeanWidthPct, iv.ByKind["mixed"].Pct, iv.ByKind["mixed"].MeanWidthPct)
			for _, pct := range []float64{iv.Overall.Pct, iv.ByKind["decode"].Pct} {
				require.GreaterOrEqual(t, pct, 85.0, "%s %s", sh.name, target)
				require.LessOrEqual(t, pct, 95.0, "%s %s", sh.name, target)
			}
			require.InDelta(t, 90, iv.ByKind["mixed"].Pct, 7, sh.name)
		}
	}
}

// TestH200BenchTeardown: the worker that captured the first Llama grid
// (bench-steady, uniform points) decoded a step's message into Python
// objects and freed them when the next message replaced it, after the next
// step's receive timer and before its preparation timer: a steady point's
// inter-update period paid the teardown of its admission's B prompts (a
// Python int per token), which a traffic step, following steps that
// admitted a prompt or none, does not. The worker now frees a step's
// message inside that step, and the three shapes' grids were re-captured
// with it: the period's remainder outside the device time and the
// worker's timers no longer grows with the prompt tokens the admission
// before shipped. It falls a little instead: after the largest admissions
// the period is shorter than the worker's timers summed, since the worker
// starts the steady step as soon as it has written the admission's output,
// and the driver, which opens the period when it has taken that output,
// takes longest after those admissions.
func TestH200BenchTeardown(t *testing.T) {
	type grid struct {
		name, bench string
		paid        bool // captured by the worker that freed a message with the next
	}
	grids := []grid{{"Llama-3.1-8B, first grid", "bench-steady", true}}
	for _, sh := range h200Shapes {
		grids = append(grids, grid{sh.name, sh.bench, false})
	}
	for _, g := range grids {
		set := h200Load(t, g.bench)
		shipped := map[int64]float64{} // prompt tokens each step's new requests shipped
		for _, r := range set.reqs {
			if r.IsNew {
				shipped[r.StepID] += float64(r.PromptLen)
			}
		}
		l := h200Data(t, TargetWall, Selection{Kinds: []string{datasets.KindDecode}}, g.bench)
		byID := map[int64]int{}
		for i := range set.steps {
			byID[set.steps[i].StepID] = i
		}
		var untimed, admitted []float64
		for _, s := range l.Steps {
			prev := set.steps[byID[s.StepID]-1]
			require.EqualValues(t, s.NumDecodeRequests, prev.NumNewReqs, "%s step %d: a steady point follows its admission", g.name, s.StepID)
			untimed = append(untimed, float64(s.WallTimeNs-s.GPUTimeNs-s.HostPrepNs-s.WorkerRecvNs-s.SampleNs))
			admitted = append(admitted, shipped[prev.StepID])
		}
		slope, corr := slopeOf(admitted, untimed), pearson(admitted, untimed)
		t.Logf("%-26s steady grid: untimed remainder %+.1f ns per prompt token the admission before it shipped (corr %+.2f), from %+.2f to %+.2f ms",
			g.name, slope, corr, slices.Min(untimed)/1e6, slices.Max(untimed)/1e6)
		if g.paid {
			require.Greater(t, corr, 0.9, g.name)
			require.InDelta(t, 9, slope, 5, "%s: a freed Python int per token", g.name)
			continue
		}
		require.Less(t, math.Abs(slope), 2.0, g.name)
		require.Less(t, corr, 0.0, g.name)
		require.Less(t, slices.Max(untimed), 1e6, g.name)
		require.Less(t, slices.Min(untimed), 0.0, g.name)
	}

	for _, sh := range h200Shapes {
		// Traffic's remainder is a fraction of a millisecond.
		var trafficUntimed []float64
		tl := h200Data(t, TargetWall, Selection{Kinds: []string{datasets.KindDecode}}, sh.traffic...)
		for _, s := range tl.Steps {
			trafficUntimed = append(trafficUntimed, float64(s.WallTimeNs-s.GPUTimeNs-s.HostPrepNs-s.WorkerRecvNs-s.SampleNs))
		}
		slices.Sort(trafficUntimed)
		p50, p90 := fpm.SortedQuantile(trafficUntimed, 0.5), fpm.SortedQuantile(trafficUntimed, 0.9)
		require.Less(t, p90, 0.5e6, sh.name)

		// On the admission grid each measured step admits its own batch
		// (and ships it, and now frees it, inside its own period): the
		// remainder follows that, not the admission before it.
		adm := h200Load(t, strings.Replace(sh.bench, "bench-steady", "bench-admission", 1)).steps
		var rest, own, prev []float64
		for i := 1; i < len(adm); i++ {
			s := adm[i]
			if s.Role != datasets.RoleMeasured || s.BenchmarkID < 0 {
				continue
			}
			rest = append(rest, float64(s.WallTimeNs-s.GPUTimeNs-s.HostPrepNs-s.WorkerRecvNs-s.SampleNs))
			own, prev = append(own, float64(s.NewReqTokens)), append(prev, float64(adm[i-1].NewReqTokens))
		}
		t.Logf("%-22s traffic decode remainder p50 %.2f ms, p90 %.2f ms; admission grid: the remainder's correlation with the step's own admitted tokens %.2f, with the step before's %.2f",
			sh.name, p50/1e6, p90/1e6, pearson(rest, own), pearson(rest, prev))
		require.Greater(t, pearson(rest, own), pearson(rest, prev)+0.2, sh.name)
	}
}

func slopeOf(x, y []float64) float64 {
	var mx, my float64
	for i := range x {
		mx, my = mx+x[i], my+y[i]
	}
	mx, my = mx/float64(len(x)), my/float64(len(y))
	var sxy, sxx float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
	}
	return sxy / sxx
}

// TestH200MixedGraphs: the worker replays a CUDA graph for a prefill or
// mixed step of up to its largest capture size (512 tokens), padded to the
// next size; the first Llama traffic runs (datasets/h200/traffic-azure-*)
// ran those steps eagerly, bound by launching the layers' kernels from
// Python. Mixed steps of under 256 prompt tokens, device time: the graphs
// cut the median and the spread between p10 and p90.
func TestH200MixedGraphs(t *testing.T) {
	small := func(l *Loaded) []float64 {
		var y []float64
		for i, f := range l.Data.Features {
			if f.PrefillTokens < 256 {
				y = append(y, l.Data.Y[i])
			}
		}
		slices.Sort(y)
		return y
	}
	mixed := Selection{Kinds: []string{datasets.KindMixed}}
	eager := small(h200Data(t, TargetGPU, mixed, "traffic-azure-5rps", "traffic-azure-12rps"))
	l := h200Data(t, TargetGPU, mixed, h200Shapes[0].traffic...)
	graphs := small(l)
	q := fpm.SortedQuantile
	t.Logf("Llama-3.1-8B mixed steps under 256 prompt tokens, device time: eager %d steps p10 %.1f p50 %.1f p90 %.1f ms; graphs %d steps p10 %.1f p50 %.1f p90 %.1f ms",
		len(eager), q(eager, 0.1)/1e6, q(eager, 0.5)/1e6, q(eager, 0.9)/1e6, len(graphs), q(graphs, 0.1)/1e6, q(graphs, 0.5)/1e6, q(graphs, 0.9)/1e6)
	require.Less(t, q(graphs, 0.5), 0.7*q(eager, 0.5))
	require.Less(t, q(graphs, 0.9)-q(graphs, 0.1), q(eager, 0.9)-q(eager, 0.1))
	// The steps table records the graph and its padding.
	var replayed int
	for _, st := range l.Steps {
		tokens := st.SumPrefillTokens + int64(st.NumDecodeRequests)
		require.Equal(t, tokens <= 512, st.CUDAGraphSize > 0, "step %d: %d tokens", st.StepID, tokens)
		if st.CUDAGraphSize > 0 {
			replayed++
			require.GreaterOrEqual(t, int64(st.CUDAGraphSize), tokens)
			require.Equal(t, int64(st.CUDAGraphSize)-tokens, st.PaddedTokens, "step %d", st.StepID)
		}
	}
	require.Positive(t, replayed)
}

// TestH200OpsShapes: the measured-operations prior for vLLM's kernels, no
// fit, on each shape's traffic device time and on its steady grid's, and
// with the engine of steplab's worker fitted on the first Llama grid
// (ops-worker.json), which the other two shapes' data and the re-captured
// grids never saw.
func TestH200OpsShapes(t *testing.T) {
	for _, sh := range h200Shapes {
		for _, set := range []struct {
			label string
			names []string
		}{{"traffic", sh.traffic}, {"steady grid", []string{sh.bench}}} {
			d := h200Data(t, TargetGPU, Selection{}, set.names...).Data
			for _, engine := range []string{"", filepath.Join(h200Dir, "models", "ops-worker.json")} {
				m, name, err := PriorSpec{Shape: sh.name, Ops: h200OpsDatabase, Engine: engine}.Build(".")
				require.NoError(t, err)
				r := Evaluate(m, d, 0)
				logReport(t, fmt.Sprintf("%-22s %-11s %s", sh.name, set.label, strings.TrimPrefix(name, "ops("+h200OpsDatabase+", "+sh.name+")")), r)
				if engine == "" {
					require.Less(t, r.Overall.MeanBias, -20.0, "%s: vLLM's kernels under-price steplab's worker", sh.name)
				} else if set.label == "traffic" {
					require.LessOrEqual(t, r.Overall.MAPE, 15.0, sh.name)
				}
			}
		}
	}
}

// TestH200GridHost: the host time in a step's wall time is the host's
// (Python on its CPU): a recipe fitted on one machine's grid prices another
// machine's traffic with the first machine's host speed. Mistral-Nemo's and
// Qwen's grids and traffic ran on one machine; Llama's grid did not
// (docs/h200-ground-truth.md).
func TestH200GridHost(t *testing.T) {
	uuid := func(dir string) string {
		d, err := datasets.Open(dir)
		require.NoError(t, err)
		require.NotNil(t, d.Manifest.Hardware, dir)
		require.NotEmpty(t, d.Manifest.Hardware.GPUUUID, dir)
		return d.Manifest.Hardware.GPUUUID
	}
	for _, sh := range h200Shapes {
		grid := uuid(filepath.Join(h200Dir, sh.bench))
		for _, tr := range h200Paths(sh.traffic...) {
			require.Equal(t, sh.sameMachine, grid == uuid(tr), "%s: grid on %s, traffic %s on %s", sh.name, grid, tr, uuid(tr))
		}
	}
}

// TestH200OpsMeasured: the measured-operations prior read from the
// database of steplab's worker's own operations (ops:h200-sxm-worker,
// measured alone by capture ops on an H200), no fit, on the traffic
// captures of the worker generation that measured it, each priced with the
// CUDA-graph sizes its manifest recorded: for a database that records no
// generation (the unfused worker of 2026-12-01) the first Llama captures
// and the three shapes' of that day; for one that does, that generation's
// folder (datasets/h200/<generation>/). Mistral-Nemo's GEMM and
// element-wise widths are not in the 2026-12-01 database: its figures
// there test the interpolation.
func TestH200OpsMeasured(t *testing.T) {
	db, err := opdb.Open("h200-sxm-worker")
	require.NoError(t, err)
	var sets [][2]string
	if db.Generation == "" {
		sets = [][2]string{{"Llama-3.1-8B", "traffic-azure-5rps"}, {"Llama-3.1-8B", "traffic-azure-12rps"}}
		for _, sh := range h200Shapes {
			for _, tr := range sh.traffic {
				sets = append(sets, [2]string{sh.name, tr})
			}
		}
	} else {
		for _, sh := range (h200Gen{dir: db.Generation}).shapes() {
			for _, tr := range sh.traffic {
				sets = append(sets, [2]string{sh.name, tr})
			}
		}
	}
	t.Logf("ops:h200-sxm-worker measured by the worker generation %q (%s)", db.Generation, db.Version)
	for _, s := range sets {
		m, _, err := PriorSpec{Shape: s[0], Ops: "h200-sxm-worker"}.Build(".")
		require.NoError(t, err)
		m, err = WithGraphs(m, nil, h200Paths(s[1]))
		require.NoError(t, err)
		r := Evaluate(m, h200Data(t, TargetGPU, Selection{}, s[1]).Data, 0)
		logReport(t, fmt.Sprintf("%-22s %s", s[0], s[1]), r)
		// assert: every capture's row is logged, failing or not.
		assert.LessOrEqual(t, r.Overall.MAPE, 15.0, "%s %s", s[0], s[1])
		assert.Less(t, math.Abs(r.Overall.MeanBias), 12.0, "%s %s", s[0], s[1])
	}
}
