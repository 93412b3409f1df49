package fit

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/model"
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
}

var h200Shapes = []h200Shape{
	{"Llama-3.1-8B", "llama-3.1-8b/bench-steady", []string{"traffic-azure-5rps", "traffic-azure-12rps"}},
	{"Mistral-Nemo-Base-2407", "mistral-nemo-base-2407/bench-steady",
		[]string{"mistral-nemo-base-2407/traffic-azure-5rps", "mistral-nemo-base-2407/traffic-azure-12rps"}},
	{"Qwen2.5-7B", "qwen2.5-7b/bench-steady", []string{"qwen2.5-7b/traffic-azure-5rps", "qwen2.5-7b/traffic-azure-12rps"}},
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
	l, err := LoadDatasets(h200Paths(names...), LoadOptions{Target: target, Selection: sel})
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
			require.Less(t, got[h200Forms[1].name].decode.MAPE, got[h200Forms[0].name].decode.MAPE, "%s %s: the ragged terms beat the grid's", sh.name, target)
			switch target {
			case TargetGPU:
				for _, f := range h200Forms[:2] {
					require.Less(t, def.decode.MAPE, got[f.name].decode.MAPE, "%s: the regimes beat %s", sh.name, f.name)
					require.Less(t, def.decode.P90APE, got[f.name].decode.P90APE, "%s: the regimes beat %s", sh.name, f.name)
				}
				// Issue 14's decode targets, on device time.
				require.LessOrEqual(t, def.decode.MAPE, 3.0, sh.name)
				require.LessOrEqual(t, def.decode.P90APE, 6.0, sh.name)
			case TargetWall:
				// The grid's inter-update periods carry a cost traffic's do not
				// (TestH200BenchTeardown): every form over-predicts, and the
				// closer a form follows the grid the more (the ranking on
				// device time does not carry).
				for _, f := range h200Forms {
					require.Greater(t, got[f.name].decode.MeanBias, 1.0, "%s %s", sh.name, f.name)
				}
			}
			require.Greater(t, def.mixed.MAPE, 5.0, "%s: mixed steps stay above the 5%% target (TestH200MixedSpread)", sh.name)
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
			require.InDelta(t, 90, iv.Overall.Pct, 5, sh.name)
			require.InDelta(t, 90, iv.ByKind["decode"].Pct, 5, sh.name)
			require.InDelta(t, 90, iv.ByKind["mixed"].Pct, 7, sh.name)
		}
	}
}

// TestH200BenchTeardown: why the grid's wall time over-prices traffic.
// The worker that captured these grids decoded a step's message into
// Python objects and freed them when the next message replaced it, after
// the next step's receive timer and before its preparation timer (it now
// frees them inside their own step): a steady benchmark point's
// inter-update period pays the teardown of the admission message before
// it (B prompts in full), which a traffic step, following steps that
// admitted a prompt or none, does not. The share of the period outside the
// device time and the worker's timers grows with the prompt tokens the
// step before admitted on the steady grid, and is a fraction of a
// millisecond on traffic. Fitted on the grid's timed windows alone (device
// + receive + preparation + sampling), the recipe prices the traffic's
// wall time near the device-time figures.
func TestH200BenchTeardown(t *testing.T) {
	for _, sh := range h200Shapes {
		l := h200Data(t, TargetWall, Selection{}, sh.bench)
		all := h200Load(t, sh.bench).steps
		byID := map[int64]int{}
		for i := range all {
			byID[all[i].StepID] = i
		}
		var untimed, admitted []float64
		for _, s := range l.Steps {
			i := byID[s.StepID]
			if s.Kind != datasets.KindDecode || i == 0 {
				continue
			}
			untimed = append(untimed, float64(s.WallTimeNs-s.GPUTimeNs-s.HostPrepNs-s.WorkerRecvNs-s.SampleNs))
			admitted = append(admitted, float64(all[i-1].NewReqTokens))
			require.Equal(t, s.NumDecodeRequests, all[i-1].NumNewReqs, "%s step %d: a steady point follows its admission", sh.name, s.StepID)
		}
		slope, corr := slopeOf(admitted, untimed), pearson(admitted, untimed)
		var trafficUntimed []float64
		tl := h200Data(t, TargetWall, Selection{Kinds: []string{datasets.KindDecode}}, sh.traffic...)
		for _, s := range tl.Steps {
			trafficUntimed = append(trafficUntimed, float64(s.WallTimeNs-s.GPUTimeNs-s.HostPrepNs-s.WorkerRecvNs-s.SampleNs))
		}
		slices.Sort(trafficUntimed)
		p50, p90 := model.SortedQuantile(trafficUntimed, 0.5), model.SortedQuantile(trafficUntimed, 0.9)
		t.Logf("%-22s steady grid: untimed remainder %.1f ns per prompt token the admission before it shipped (corr %.2f, up to %.1f ms); traffic decode: p50 %.2f ms, p90 %.2f ms",
			sh.name, slope, corr, slices.Max(untimed)/1e6, p50/1e6, p90/1e6)
		require.Greater(t, corr, 0.9, sh.name)
		require.InDelta(t, 9, slope, 5, "%s: a freed Python int per token", sh.name)
		require.Less(t, p90, 0.5e6, sh.name)

		// On the admission grid each measured step admits its own batch
		// (and ships it before its timers start): the remainder follows
		// that, not the admission before it.
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
		t.Logf("%-22s admission grid: untimed remainder's correlation with the step's own admitted tokens %.2f, with the step before's %.2f",
			sh.name, pearson(rest, own), pearson(rest, prev))
		require.Greater(t, pearson(rest, own), pearson(rest, prev)+0.2, sh.name)

		// The grid's timed windows as the target, the traffic's wall time as the test.
		timed := l.Data.Subset(seq(l.Data.Len()))
		for i, s := range l.Steps {
			timed.Y[i] = float64(s.GPUTimeNs + s.HostPrepNs + s.WorkerRecvNs + s.SampleNs)
		}
		res, err := FitRecipe(timed, RecipeOptions{Seed: 1, SkipResiduals: true})
		require.NoError(t, err)
		wall := h200Data(t, TargetWall, Selection{Kinds: []string{datasets.KindDecode}}, sh.traffic...).Data
		m := Evaluate(res.Model, wall, 0).Overall
		t.Logf("%-22s fitted on the grid's timed windows, on traffic wall time: decode MAPE %.2f%% p90 %.2f%% bias %+.2f%%", sh.name, m.MAPE, m.P90APE, m.MeanBias)
		require.Less(t, math.Abs(m.MeanBias), 2.5, sh.name)
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

// TestH200MixedSpread: mixed steps (a prompt riding with decodes) run
// eagerly and are launch-bound; steps of one composition take times far
// apart, so even a linear form fitted on the traffic's own mixed steps
// (an upper bound for any model fitted elsewhere) stays above 5% MAPE.
func TestH200MixedSpread(t *testing.T) {
	terms := []string{model.TermConst, model.TermPrefillTokens, model.TermPrefillAttn, model.TermPrefillRequests,
		model.TermDecodeRequests, model.TermDecodeKVTokens, model.TermDecodeMaxKV, model.TermDecodeBatchMaxKV}
	for _, sh := range h200Shapes {
		for _, target := range []string{TargetWall, TargetGPU} {
			mixed := h200Data(t, target, Selection{Kinds: []string{datasets.KindMixed}}, sh.traffic...).Data
			r, err := Linear(mixed, Options{Terms: terms, Method: MethodHuberNN, Relative: true, Degenerate: DegenerateDrop})
			require.NoError(t, err)
			m := Evaluate(r.Model, mixed, 0).Overall
			// The spread of small prompts: steps of under 256 prompt tokens.
			var small []float64
			for i, f := range mixed.Features {
				if f.PrefillTokens < 256 {
					small = append(small, mixed.Y[i])
				}
			}
			slices.Sort(small)
			t.Logf("%-22s %-12s %d traffic mixed steps, in-sample on themselves (%s): MAPE %.2f%% p90 %.2f%%; prompts under 256 tokens: p10 %.1f ms, p90 %.1f ms",
				sh.name, target, mixed.Len(), strings.Join(terms, ","), m.MAPE, m.P90APE, model.SortedQuantile(small, 0.1)/1e6, model.SortedQuantile(small, 0.9)/1e6)
			require.Greater(t, m.MAPE, 5.0, sh.name)
		}
	}
}

// TestH200OpsShapes: the measured-operations prior for vLLM's kernels, no
// fit, on each shape's traffic device time, and with the engine of
// steplab's worker fitted on the Llama grid (ops-worker.json), which the
// other two shapes' data never saw.
func TestH200OpsShapes(t *testing.T) {
	for _, sh := range h200Shapes {
		traffic := h200Data(t, TargetGPU, Selection{}, sh.traffic...).Data
		for _, engine := range []string{"", filepath.Join(h200Dir, "models", "ops-worker.json")} {
			m, name, err := PriorSpec{Shape: sh.name, Ops: h200OpsDatabase, Engine: engine}.Build(".")
			require.NoError(t, err)
			r := Evaluate(m, traffic, 0)
			logReport(t, fmt.Sprintf("%-22s %s", sh.name, strings.TrimPrefix(name, "ops("+h200OpsDatabase+", "+sh.name+")")), r)
			if engine == "" {
				require.Less(t, r.Overall.MeanBias, -20.0, "%s: vLLM's kernels under-price steplab's worker", sh.name)
			} else {
				require.LessOrEqual(t, r.Overall.MAPE, 15.0, sh.name)
			}
		}
	}
}
