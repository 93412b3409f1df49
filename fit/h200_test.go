package fit

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/internal/rewrite"
)

// R1–R3 (docs/architecture.md#reproduction-targets) and the honesty of the measurement, asserted on the
// ground truth captured on an NVIDIA H200 (datasets/h200/, described in
// datasets/h200/README.md; the figures and their discussion are in
// docs/h200-ground-truth.md). Every test logs the numbers the document
// quotes; run with -v to see them. The tolerances are wide enough for a
// re-capture on the same machine and tight enough that the finding itself
// (not just its sign) is checked.
//
// Regenerate datasets/h200/models/host.json with
//
//	go test ./fit -run TestH200HostModel -rewrite

const h200Dir = "../datasets/h200"

type h200Set struct {
	steps []datasets.Step
	reqs  []datasets.StepRequest
}

var h200Cache = map[string]*h200Set{}

func h200Load(t *testing.T, name string) *h200Set {
	t.Helper()
	if s, ok := h200Cache[name]; ok {
		return s
	}
	dir := name
	if !filepath.IsAbs(name) {
		dir = filepath.Join(h200Dir, name)
	}
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	steps, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
	require.NoError(t, err)
	reqs, err := datasets.ReadAll[datasets.StepRequest](d, datasets.TableStepRequests)
	require.NoError(t, err)
	sort.Slice(steps, func(i, j int) bool { return steps[i].StepID < steps[j].StepID })
	s := &h200Set{steps: steps, reqs: reqs}
	h200Cache[name] = s
	return s
}

// h200Point is a measured decode benchmark point: B requests at context
// ctx (KV tokens read per request).
type h200Point struct{ B, Ctx int }

func h200PointOf(s *datasets.Step) h200Point {
	b := int(s.NumDecodeRequests)
	return h200Point{b, int(s.SumDecodeKVTokens) / b}
}

// h200Measured maps each measured decode point of a bench dataset to its
// row index.
func h200Measured(set *h200Set) map[h200Point]int {
	out := map[h200Point]int{}
	for i := range set.steps {
		s := &set.steps[i]
		if s.Role == datasets.RoleMeasured && s.Kind == datasets.KindDecode && s.BenchmarkID >= 0 {
			out[h200PointOf(s)] = i
		}
	}
	return out
}

var h200Batches = []int{1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512}

func ms(ns float64) float64 { return ns / 1e6 }

// R1: an admission step ships every prompt through scheduled_new_reqs; the
// steady second step ships deltas through scheduled_cached_reqs.
func TestH200R1Payload(t *testing.T) {
	adm, std := h200Load(t, "bench-admission"), h200Load(t, "bench-steady")
	am, sm := h200Measured(adm), h200Measured(std)
	require.Len(t, sm, 58)
	require.Len(t, am, len(sm))
	var pts []h200Point
	for p := range sm {
		pts = append(pts, p)
	}
	slices.SortFunc(pts, func(a, b h200Point) int {
		if a.B != b.B {
			return a.B - b.B
		}
		return a.Ctx - b.Ctx
	})
	t.Logf("%5s %6s %14s %12s %9s %12s %12s", "B", "ctx", "admission B", "steady B", "ratio", "adm B/token", "std B/req")
	maxCtx := map[int]int{}
	for _, p := range pts {
		a, s := &adm.steps[am[p]], &std.steps[sm[p]]
		require.Equal(t, int32(p.B), a.NumNewReqs, "the admission point admits its batch")
		require.Zero(t, s.NumNewReqs, "the steady point admits nothing")
		require.Equal(t, int32(p.B), s.NumCachedReqs)
		ratio := float64(a.PayloadBytes) / float64(s.PayloadBytes)
		perTok := float64(a.PayloadNewBytes) / float64(p.B*p.Ctx)
		perReq := float64(s.PayloadCachedBytes) / float64(p.B)
		t.Logf("%5d %6d %14d %12d %8.0fx %12.2f %12.1f", p.B, p.Ctx, a.PayloadBytes, s.PayloadBytes, ratio, perTok, perReq)
		require.Greater(t, ratio, 1.0)
		// A prompt token costs ~5 bytes of msgpack (int32 ids; the
		// request's other fields spread over short prompts), a cached
		// request a few dozen bytes whatever its context.
		if p.Ctx >= 1024 {
			require.InDelta(t, 5.3, perTok, 0.5, "admission bytes per prompt token at %v", p)
		}
		if p.B >= 32 {
			require.Less(t, perReq, 30.0, "steady bytes per request at %v", p)
		}
		if p.Ctx > maxCtx[p.B] {
			maxCtx[p.B] = p.Ctx
		}
	}
	// The largest point of the grid: B=512 at its largest KV-feasible
	// context (1,024 tokens: 54,829 blocks of 16 hold 877K tokens).
	top := h200Point{512, maxCtx[512]}
	require.Equal(t, 1024, top.Ctx)
	a, s := &adm.steps[am[top]], &std.steps[sm[top]]
	ratio := float64(a.PayloadBytes) / float64(s.PayloadBytes)
	t.Logf("R1 at B=512 ctx=1024: admission %.2f MB (new %.2f MB) vs steady %.1f KB: %.0fx (published self-benchmark: 8.5 MB vs 6.8 KB at B=513, ~1250x)",
		float64(a.PayloadBytes)/1e6, float64(a.PayloadNewBytes)/1e6, float64(s.PayloadBytes)/1e3, ratio)
	require.Greater(t, a.PayloadBytes, int64(2_500_000))
	require.Less(t, s.PayloadBytes, int64(25_000))
	require.Greater(t, ratio, 100.0)
	// The published ~1250x needs multi-thousand-token contexts: at B=384 and
	// 2,048 tokens the grid already ships 4.15 MB against 15 KB.
	p384 := h200Point{384, 2048}
	r384 := float64(adm.steps[am[p384]].PayloadBytes) / float64(std.steps[sm[p384]].PayloadBytes)
	t.Logf("R1 at B=384 ctx=2048: %.2f MB vs %.1f KB: %.0fx", float64(adm.steps[am[p384]].PayloadBytes)/1e6,
		float64(std.steps[sm[p384]].PayloadBytes)/1e3, r384)
	require.Greater(t, r384, 250.0)
	// Extrapolated to the published measurement's shape (B=513 × 4,096 tokens): the bytes
	// per token and per cached request measured here.
	perTok := float64(a.PayloadNewBytes) / float64(top.B*top.Ctx)
	perReq := float64(s.PayloadBytes) / float64(top.B)
	ext := 513 * 4096 * perTok
	t.Logf("R1 extrapolated to B=513 ctx=4096: %.1f MB vs %.1f KB (%.0fx)", ext/1e6, 513*perReq/1e3, ext/(513*perReq))
	// The ratio grows with the context at every batch size.
	for _, b := range h200Batches {
		var prev float64
		for _, p := range pts {
			if p.B != b {
				continue
			}
			r := float64(adm.steps[am[p]].PayloadBytes) / float64(std.steps[sm[p]].PayloadBytes)
			require.Greater(t, r, prev, "payload ratio grows with context at B=%d", b)
			prev = r
		}
	}
}

// R2: the steady step is scheduled while its admission step still runs on
// the GPU, so its narrow schedule→output window also counts the rest of
// that step; the inter-update period counts only its own.
func TestH200R2Windows(t *testing.T) {
	std := h200Load(t, "bench-steady")
	sm := h200Measured(std)
	t.Logf("%5s %6s %9s %11s %9s %9s %9s %9s %9s", "B", "ctx", "narrow", "adm rest", "+ own", "wall", "gpu", "adm wall", "narrow/wall")
	byB := map[int][]float64{}
	for _, b := range h200Batches {
		for _, ctx := range []int{128, 512, 1024, 2048, 4096, 8192} {
			i, ok := sm[h200Point{b, ctx}]
			if !ok {
				continue
			}
			s, a := &std.steps[i], &std.steps[i-1]
			require.Equal(t, datasets.RoleScaffolding, a.Role, "the admission step precedes its steady step")
			require.Equal(t, s.BenchmarkID, a.BenchmarkID)
			require.True(t, s.Overlapped, "the steady step is scheduled during the admission step")
			rest := float64(a.TOutput - s.TScheduleStart) // admission time still to run when schedule() starts
			own := float64(s.WallTimeNs)
			narrow := float64(s.NarrowTimeNs)
			t.Logf("%5d %6d %9.2f %11.2f %9.2f %9.2f %9.2f %9.2f %9.2fx", b, ctx, ms(narrow), ms(rest), ms(rest+own),
				ms(own), ms(float64(s.GPUTimeNs)), ms(float64(a.WallTimeNs)), narrow/own)
			// narrow = rest + own + the admission step's update, to 2%.
			require.InDelta(t, 1, narrow/(rest+own), 0.02, "B=%d ctx=%d", b, ctx)
			// schedule() of the steady step starts as soon as the admission
			// payload is handed over: all of the admission step after its
			// dispatch is still ahead.
			require.InDelta(t, 1, rest/float64(a.TOutput-a.TDispatch), 0.02, "B=%d ctx=%d", b, ctx)
			require.Greater(t, narrow/own, 1.5, "narrow window inflated at B=%d ctx=%d", b, ctx)
			// The inter-update period is the step's own device time plus
			// the worker's per-step host work: never below the CUDA-event
			// time, and within 1.4x of it.
			require.GreaterOrEqual(t, own, float64(s.GPUTimeNs))
			require.Less(t, own/float64(s.GPUTimeNs), 1.4, "B=%d ctx=%d", b, ctx)
			byB[b] = append(byB[b], narrow/own)
		}
	}
	// B=1, the published measurement's row (11.29 ≈ 6.74 + 4.83; 4.71 vs 4.83 ms): here the
	// steady period is also checked against production: the B=1 decode
	// steps of the 5 req/s traffic run.
	s := &std.steps[sm[h200Point{1, 1024}]]
	a := &std.steps[sm[h200Point{1, 1024}]-1]
	var prod []float64
	for _, st := range h200Load(t, "traffic-azure-5rps").steps {
		if st.Kind == datasets.KindDecode && st.NumDecodeRequests == 1 {
			prod = append(prod, float64(st.WallTimeNs))
		}
	}
	sort.Float64s(prod)
	med := prod[len(prod)/2]
	t.Logf("R2 at B=1 ctx=1024: narrow %.2f ms ≈ %.2f (admission rest) + %.2f (own); inter-update %.2f ms vs CUDA events %.2f ms; production B=1 decode inter-update median %.2f ms (n=%d); admission step %.2f ms",
		ms(float64(s.NarrowTimeNs)), ms(float64(a.TOutput-s.TScheduleStart)), ms(float64(s.WallTimeNs)), ms(float64(s.WallTimeNs)),
		ms(float64(s.GPUTimeNs)), ms(med), len(prod), ms(float64(a.WallTimeNs)))
	require.InDelta(t, 1, float64(s.WallTimeNs)/med, 0.05, "the steady B=1 period matches production B=1 decode")
	require.Greater(t, float64(a.WallTimeNs)/med, 1.03, "the admission B=1 step does not")
	for _, b := range h200Batches {
		t.Logf("B=%d: narrow/inter-update from %.2fx to %.2fx", b, slices.Min(byB[b]), slices.Max(byB[b]))
	}
}

// R3, first half: the admission step of a decode point costs more than its
// steady second step, increasingly with B.
func TestH200R3Inflation(t *testing.T) {
	adm, std := h200Load(t, "bench-admission"), h200Load(t, "bench-steady")
	am, sm := h200Measured(adm), h200Measured(std)
	for _, ctx := range []int{128, 512, 1024} {
		var ratios []float64
		t.Logf("ctx=%d: %5s %12s %10s %7s %10s %10s %12s", ctx, "B", "admission ms", "steady ms", "ratio", "adm gpu", "std gpu", "paired ratio")
		for _, b := range h200Batches {
			p := h200Point{b, ctx}
			a, s := &adm.steps[am[p]], &std.steps[sm[p]]
			paired := &std.steps[sm[p]-1] // the admission step of the same run
			r := float64(a.WallTimeNs) / float64(s.WallTimeNs)
			ratios = append(ratios, r)
			t.Logf("ctx=%d: %5d %12.2f %10.2f %6.2fx %10.2f %10.2f %11.2fx", ctx, b, ms(float64(a.WallTimeNs)), ms(float64(s.WallTimeNs)), r,
				ms(float64(a.GPUTimeNs)), ms(float64(s.GPUTimeNs)), float64(paired.WallTimeNs)/float64(s.WallTimeNs))
			require.Greater(t, r, 1.0, "admission costs more at B=%d ctx=%d", b, ctx)
			// The device time barely moves: the inflation is host work.
			// Except at the first point of each new batch size (ctx=128,
			// B ≥ 2), whose admission step is the first run of that size
			// after the warm-ups and costs up to 2.1 ms more on the device
			// at small B (logged above); its steady step does not.
			if ctx > 128 || b == 1 {
				require.InDelta(t, 1, float64(a.GPUTimeNs)/float64(s.GPUTimeNs), 0.05, "device time at B=%d ctx=%d", b, ctx)
			}
		}
		// Inflation grows with B: small batches within 25%, B ≥ 128 at
		// least 1.7x, and every B ≥ 64 above every B ≤ 4.
		require.Less(t, ratios[0], 1.25, "B=1 ctx=%d", ctx)
		for i, b := range h200Batches {
			if b >= 128 {
				require.Greater(t, ratios[i], 1.7, "B=%d ctx=%d", b, ctx)
			}
			if b >= 64 {
				require.Greater(t, ratios[i], slices.Max(ratios[:3]), "B=%d ctx=%d", b, ctx)
			}
		}
	}
}

// h200Traffic is the production decode steps of both traffic runs, target
// wall_time_ns. padded_batch is the CUDA-graph size the worker ran: these
// captures predate cuda_graph_size, and features.Of reads it as
// num_decode_requests + padded_tokens (the padding the capture records).
func h200Traffic(t *testing.T) *Data {
	t.Helper()
	var steps []datasets.Step
	for _, n := range []string{"traffic-azure-5rps", "traffic-azure-12rps"} {
		for _, s := range h200Load(t, n).steps {
			if s.Kind == datasets.KindDecode && s.Role == datasets.RoleProduction && s.Valid {
				steps = append(steps, s)
			}
		}
	}
	d, err := DataFromSteps(steps, TargetWall)
	require.NoError(t, err)
	return d
}

// Bands of h200RaggedBias: decode batch size, longest context in the step.
var (
	h200BatchBands   = []string{"9-32", "33-128"}
	h200ContextBands = []string{"<2K", "2K-4K", ">=4K"}
)

type raggedCell struct {
	n    int
	bias float64 // sum of per-step bias, percent
}

// h200RaggedBias is m's bias on the traffic runs' production decode steps
// of 9 requests or more, by batch band and by the longest context in the
// step (computed + scheduled tokens of its longest request), on target.
func h200RaggedBias(t *testing.T, m fpm.FPM, target string) map[[2]string]*raggedCell {
	t.Helper()
	var steps []datasets.Step
	var maxCtx []int64
	for _, n := range []string{"traffic-azure-5rps", "traffic-azure-12rps"} {
		set := h200Load(t, n)
		mx := map[int64]int64{}
		for _, r := range set.reqs {
			mx[r.StepID] = max(mx[r.StepID], r.NumComputedTokens+r.NumScheduledTokens)
		}
		for _, st := range set.steps {
			if st.Kind == datasets.KindDecode && st.Role == datasets.RoleProduction && st.Valid && st.NumDecodeRequests >= 9 {
				steps = append(steps, st)
				maxCtx = append(maxCtx, mx[st.StepID])
			}
		}
	}
	d, err := DataFromSteps(steps, target)
	require.NoError(t, err)
	cells := map[[2]string]*raggedCell{}
	for i := range d.Y {
		bk := h200BatchBands[0]
		if d.Features[i].DecodeRequests > 32 {
			bk = h200BatchBands[1]
		}
		ck := h200ContextBands[0]
		if maxCtx[i] >= 4096 {
			ck = h200ContextBands[2]
		} else if maxCtx[i] >= 2048 {
			ck = h200ContextBands[1]
		}
		c := cells[[2]string{bk, ck}]
		if c == nil {
			c = &raggedCell{}
			cells[[2]string{bk, ck}] = c
		}
		c.n++
		c.bias += 100 * (m.PredictNs(d.Features[i]) - d.Y[i]) / d.Y[i]
	}
	return cells
}

func logRagged(t *testing.T, label string, cells map[[2]string]*raggedCell) {
	t.Helper()
	for _, bk := range h200BatchBands {
		for _, ck := range h200ContextBands {
			if c := cells[[2]string{bk, ck}]; c != nil {
				t.Logf("%s, B %-6s longest context %-6s n=%5d mean bias %+6.2f%%", label, bk, ck, c.n, c.bias/float64(c.n))
			}
		}
	}
}

func h200Grid(t *testing.T, name string, maxB int) *Data {
	t.Helper()
	var steps []datasets.Step
	for _, s := range h200Load(t, name).steps {
		if s.Kind == datasets.KindDecode && s.Role == datasets.RoleMeasured && s.Valid && int(s.NumDecodeRequests) <= maxB {
			steps = append(steps, s)
		}
	}
	d, err := DataFromSteps(steps, TargetWall)
	require.NoError(t, err)
	return d
}

// R3, second half: the same linear form fitted on each grid, evaluated on
// the held-out production decode steps of both traffic runs.
func TestH200R3Fits(t *testing.T) {
	traffic := h200Traffic(t)
	require.Greater(t, traffic.Len(), 8000)
	type res struct {
		kv   float64
		m    Metrics
		buck []BucketMetrics
	}
	fitEval := func(name string, terms []string, held *Data, maxB int) res {
		grid := h200Grid(t, name, maxB)
		r, err := Linear(grid, Options{Terms: terms})
		require.NoError(t, err)
		rep := Evaluate(r.Model, held, 0)
		t.Logf("%-15s B<=%-3d %-45s n=%d: traffic MAPE %5.2f%% p90 %5.2f%% bias %+6.2f%% (%s)", name, maxB, strings.Join(terms, ","), grid.Len(),
			rep.Overall.MAPE, rep.Overall.P90APE, rep.Overall.MeanBias, coefString(r.Model))
		return res{kv: r.Model.Coef[indexOf(r.Model.Terms, fpm.TermDecodeKVTokens)], m: rep.Overall, buck: rep.ByBucket}
	}
	st := fitEval("bench-steady", DecodeTerms, traffic, 512)
	ad := fitEval("bench-admission", DecodeTerms, traffic, 512)
	t.Logf("R3 decode_kv_tokens: admission %.1f ns/token vs steady %.1f (%.1fx; seed 6.03 vs 1.2, 5x)", ad.kv, st.kv, ad.kv/st.kv)
	t.Logf("R3 traffic (n=%d decode steps): steady-grid model MAPE %.2f%% p90 %.2f%% bias %+.2f%%; admission-grid model MAPE %.2f%% p90 %.2f%% bias %+.2f%%",
		traffic.Len(), st.m.MAPE, st.m.P90APE, st.m.MeanBias, ad.m.MAPE, ad.m.P90APE, ad.m.MeanBias)
	for i := range st.buck {
		t.Logf("  bucket %-7s n=%5d steady MAPE %6.2f%% bias %+6.2f%% | admission MAPE %6.2f%% bias %+6.2f%%", st.buck[i].Bucket, st.buck[i].Count,
			st.buck[i].MAPE, st.buck[i].MeanBias, ad.buck[i].MAPE, ad.buck[i].MeanBias)
	}
	require.Less(t, st.m.MAPE, 10.0)
	require.Less(t, st.m.P90APE, 20.0)
	require.Greater(t, ad.m.MAPE, 25.0)
	require.Greater(t, ad.m.MeanBias, 25.0, "the admission-grid model over-predicts production decode")
	require.Less(t, 3*st.m.MAPE, ad.m.MAPE)
	require.Less(t, st.m.P90APE, ad.m.P90APE)
	require.Greater(t, ad.kv, 3*st.kv, "admission inflates the KV-token cost")
	// Every batch bucket: the steady model is the better one.
	for i := range st.buck {
		require.Less(t, st.buck[i].MAPE, ad.buck[i].MAPE, "bucket %s", st.buck[i].Bucket)
	}

	// Priced at the CUDA-graph size the worker actually ran (padded_batch
	// instead of decode_requests; on the grid the two are equal, every B
	// being a capture size).
	padTerms := []string{fpm.TermConst, fpm.TermPaddedBatch, fpm.TermDecodeKVTokens}
	stp := fitEval("bench-steady", padTerms, traffic, 512)
	adp := fitEval("bench-admission", padTerms, traffic, 512)
	require.Less(t, stp.m.MAPE, st.m.MAPE, "padding to the graph size explains part of the steady model's error")
	require.Less(t, stp.m.MAPE, adp.m.MAPE)

	// Why the steady model under-predicts B 9–128 by 7–11%: the grid's
	// batches are uniform (every request at the same context); traffic
	// batches are ragged, and with splits = 1 (B ≥ 33 on 132 SMs) or 2,
	// one program walks each request's KV serially, so the longest
	// context sets the attention time. The residual grows with the
	// longest context in the step.
	stModel, err := Linear(h200Grid(t, "bench-steady", 512), Options{Terms: DecodeTerms})
	require.NoError(t, err)
	cells := h200RaggedBias(t, stModel.Model, TargetWall)
	logRagged(t, "steady model on traffic", cells)
	for _, bk := range h200BatchBands {
		short, long := cells[[2]string{bk, "<2K"}], cells[[2]string{bk, ">=4K"}]
		require.Less(t, long.bias/float64(long.n), short.bias/float64(short.n)-5, "B %s: longer longest context, larger under-prediction", bk)
	}

	// "More such points make it worse": the grids cut at growing B. Not
	// monotone here: the small-B admission grid extrapolates an even
	// steeper KV slope; adding B > 64 to the admission grid makes it
	// worse again. Every cut of the steady grid stays under 10%.
	admCut := map[int]float64{}
	for _, maxB := range []int{8, 64, 512} {
		r := fitEval("bench-admission", DecodeTerms, traffic, maxB)
		rs := fitEval("bench-steady", DecodeTerms, traffic, maxB)
		admCut[maxB] = r.m.MAPE
		require.Greater(t, r.m.MAPE, 25.0)
		require.Less(t, rs.m.MAPE, 10.0)
		require.Less(t, 3*rs.m.MAPE, r.m.MAPE)
	}
	require.Greater(t, admCut[512], admCut[64], "adding the B > 64 admission points degrades the traffic prediction")
}

// h200Quantiles returns the p50, p90 and p99 of v (sorted in place).
func h200Quantiles(v []float64) (p50, p90, p99 float64) {
	sort.Float64s(v)
	q := func(p float64) float64 { return v[min(len(v)-1, int(p*float64(len(v))))] }
	return q(0.5), q(0.9), q(0.99)
}

// The driver's own overhead per step: the Go scheduler loop's schedule(),
// the serialization of the payload, update_from_output(); and the worker's
// receive (frame read and msgpack decode), input preparation and sampling.
func TestH200DriverOverhead(t *testing.T) {
	type acc struct{ sched, ser, upd, drv, share, recv, prep, samp, rest []float64 }
	groups := map[string]*acc{}
	var keys []string
	all := &acc{}
	for _, n := range []string{"traffic-azure-5rps", "traffic-azure-12rps"} {
		for _, s := range h200Load(t, n).steps {
			b := int(s.NumDecodeRequests + s.NumPrefillRequests)
			k := fmt.Sprintf("%-7s %-7s", s.Kind, BucketOf(b))
			g := groups[k]
			if g == nil {
				g = &acc{}
				groups[k] = g
				keys = append(keys, k)
			}
			sched := float64(s.TScheduleEnd - s.TScheduleStart)
			ser := float64(s.TDispatch - s.TScheduleEnd)
			upd := float64(s.TUpdateEnd - s.TOutput)
			require.GreaterOrEqual(t, sched, 0.0)
			require.GreaterOrEqual(t, ser, 0.0)
			require.GreaterOrEqual(t, upd, 0.0)
			drv := sched + ser + upd
			rest := float64(s.WallTimeNs - s.GPUTimeNs - s.HostPrepNs - s.SampleNs - s.WorkerRecvNs)
			for _, x := range []*acc{g, all} {
				x.sched = append(x.sched, sched)
				x.ser = append(x.ser, ser)
				x.upd = append(x.upd, upd)
				x.drv = append(x.drv, drv)
				x.share = append(x.share, 100*drv/float64(s.WallTimeNs))
				x.recv = append(x.recv, float64(s.WorkerRecvNs))
				x.prep = append(x.prep, float64(s.HostPrepNs))
				x.samp = append(x.samp, float64(s.SampleNs))
				x.rest = append(x.rest, rest)
			}
		}
	}
	sort.Strings(keys)
	us := func(v []float64) string {
		a, b, c := h200Quantiles(v)
		return fmt.Sprintf("%6.1f/%6.1f/%7.1f", a/1e3, b/1e3, c/1e3)
	}
	pct := func(v []float64) string {
		a, b, c := h200Quantiles(v)
		return fmt.Sprintf("%5.2f/%5.2f/%5.2f", a, b, c)
	}
	t.Logf("p50/p90/p99, µs (share: %% of the inter-update period)")
	t.Logf("%-15s %5s | %-20s %-20s %-20s %-20s %-17s | %-20s %-20s %-20s %-22s", "kind batch", "n", "schedule", "serialize", "update", "driver total", "share %",
		"worker recv", "worker prep", "sample", "wall-gpu-prep-samp-recv")
	line := func(k string, g *acc) {
		t.Logf("%-15s %5d | %-20s %-20s %-20s %-20s %-17s | %-20s %-20s %-20s %-22s", k, len(g.drv), us(g.sched), us(g.ser), us(g.upd), us(g.drv), pct(g.share),
			us(g.recv), us(g.prep), us(g.samp), us(g.rest))
	}
	for _, k := range keys {
		line(k, groups[k])
	}
	line("all", all)
	p50, p90, p99 := h200Quantiles(all.drv)
	s50, s90, s99 := h200Quantiles(all.share)
	t.Logf("driver overhead per production step: p50 %.1f µs, p90 %.1f µs, p99 %.1f µs; share of the inter-update period p50 %.2f%%, p90 %.2f%%, p99 %.2f%%",
		p50/1e3, p90/1e3, p99/1e3, s50, s90, s99)
	// The Go loop costs tens of microseconds against steps of 6 ms and
	// more: under 0.1 ms at the median, under 1% of the period at p99.
	require.Less(t, p50, 100e3)
	require.Less(t, p99, 500e3)
	require.Less(t, s50, 1.0)
	require.Less(t, s99, 2.0)
}

// h200HostFile is datasets/h200/models/host.json.
type h200HostFile struct {
	Comment  string        `json:"comment"`
	Datasets []string      `json:"datasets"`
	Model    fpm.HostModel `json:"model"`
	Default  fpm.HostModel `json:"default"`
	Fits     []*TermFit    `json:"fits"`
}

var h200HostSets = []string{"bench-admission", "bench-steady", "traffic-azure-5rps", "traffic-azure-12rps"}

// h200FitHost fits every phase of fpm.HostModel from the captures
// (FitHostSteps): the worker's input preparation (host_prep_ns) on
// HostPrepTerms; shipping (serialization in the driver, t_dispatch −
// t_schedule_end, plus the worker's frame receive and decode,
// worker_recv_ns) on 1 and payload bytes; schedule() (t_schedule_end −
// t_schedule_start) on 1, requests and new requests; update_from_output()
// (t_update_end − t_output) on 1 and requests. Warm-up steps are left out.
func h200FitHost(t *testing.T) *h200HostFile {
	t.Helper()
	var steps []datasets.Step
	var reqs []datasets.StepRequest
	var off int64
	for _, n := range h200HostSets {
		set := h200Load(t, n)
		var maxID int64
		for _, s := range set.steps {
			maxID = max(maxID, s.StepID)
			if s.Valid && !strings.Contains(s.SampleReason, "warmup") {
				s.StepID += off
				steps = append(steps, s)
			}
		}
		for _, r := range set.reqs {
			r.StepID += off
			reqs = append(reqs, r)
		}
		off += maxID + 1
	}
	def := fpm.DefaultHostModel()
	hf, err := FitHostSteps(steps, reqs, def, HostStepsOptions{})
	require.NoError(t, err)
	out := &h200HostFile{
		Comment: "fpm.HostModel fitted by fit/h200_test.go (TestH200HostModel) from the H200 captures; see docs/h200-ground-truth.md. " +
			"Schedule and update are steplab's Go driver loop, not vLLM's Python scheduler; prep and ship are the Python worker and the msgpack pipe.",
		Model: hf.Model, Default: def, Fits: hf.Fits,
	}
	for _, n := range h200HostSets {
		out.Datasets = append(out.Datasets, "datasets/h200/"+n)
	}
	return out
}

func TestH200HostModel(t *testing.T) {
	got := h200FitHost(t)
	path := filepath.Join(h200Dir, "models", "host.json")
	if rewrite.Requested() {
		b, err := json.MarshalIndent(got, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, append(b, '\n'), 0o644))
		t.Logf("wrote %s", path)
	}
	for _, f := range got.Fits {
		var parts []string
		for j, n := range f.Terms {
			parts = append(parts, fmt.Sprintf("%s=%.4g", n, f.Coef[j]))
		}
		t.Logf("%-28s rows %5d: %s; MAPE %.1f%% median %.1f%% p90 %.1f%% R² %.3f", f.Window, f.Rows, strings.Join(parts, " "),
			f.Metrics.MAPE, f.Metrics.MedianAPE, f.Metrics.P90APE, f.Metrics.R2)
	}
	fm, dm := got.Model, got.Default
	cmp := []struct {
		name     string
		fit, def float64
	}{
		{"schedule_fixed_ns", fm.ScheduleFixedNs, dm.ScheduleFixedNs},
		{"schedule_per_req_ns", fm.SchedulePerReqNs, dm.SchedulePerReqNs},
		{"schedule_per_new_req_ns", fm.SchedulePerNewReqNs, dm.SchedulePerNewReqNs},
		{"ship_fixed_ns", fm.ShipFixedNs, dm.ShipFixedNs},
		{"ship_mb_per_s", fm.ShipMBps, dm.ShipMBps},
		{"prep_fixed_ns", fm.PrepFixedNs, dm.PrepFixedNs},
		{"prep_per_req_ns", fm.PrepPerReqNs, dm.PrepPerReqNs},
		{"prep_per_token_ns", fm.PrepPerTokenNs, dm.PrepPerTokenNs},
		{"prep_per_new_req_ns", fm.PrepPerNewReqNs, dm.PrepPerNewReqNs},
		{"prep_per_new_token_ns", fm.PrepPerNewTokenNs, dm.PrepPerNewTokenNs},
		{"update_fixed_ns", fm.UpdateFixedNs, dm.UpdateFixedNs},
		{"update_per_req_ns", fm.UpdatePerReqNs, dm.UpdatePerReqNs},
	}
	for _, c := range cmp {
		t.Logf("%-24s fitted %12.2f default %12.2f (%.3gx)", c.name, c.fit, c.def, c.fit/c.def)
	}
	// The committed artifact is this fit.
	b, err := os.ReadFile(path)
	require.NoError(t, err, "regenerate with -rewrite")
	var committed h200HostFile
	require.NoError(t, json.Unmarshal(b, &committed))
	cv, gv := committed.Model, got.Model
	cb, _ := json.Marshal(cv)
	gb, _ := json.Marshal(gv)
	var cm, gm map[string]float64
	require.NoError(t, json.Unmarshal(cb, &cm))
	require.NoError(t, json.Unmarshal(gb, &gm))
	for k, v := range gm {
		require.InDelta(t, v, cm[k], 1e-6*math.Max(1, math.Abs(v)), "%s: committed host.json is stale (rerun with -rewrite)", k)
	}
	// Findings stable enough to assert: the Go driver's schedule() and
	// update are far below the Python-scheduler defaults; admission is
	// the expensive part of the worker's preparation.
	require.Less(t, fm.ScheduleFixedNs+100*fm.SchedulePerReqNs, 0.2*(dm.ScheduleFixedNs+100*dm.SchedulePerReqNs))
	require.Less(t, fm.UpdateFixedNs+100*fm.UpdatePerReqNs, 0.2*(dm.UpdateFixedNs+100*dm.UpdatePerReqNs))
	require.Greater(t, fm.PrepPerNewTokenNs, dm.PrepPerNewTokenNs, "the worker's per-prompt-token admission cost is above the prior")
	require.Less(t, fm.ShipMBps, dm.ShipMBps, "msgpack over a pipe ships slower than the prior's 200 MB/s")
}

// h200Recipe fits the default recipe on the steady grid (wall time) and,
// with calibrate, calibrates it on the given half of the named traffic runs.
func h200Recipe(t *testing.T, calibrate []string, half int) *fpm.Recipe {
	t.Helper()
	cfg := FitConfig{Load: LoadOptions{Target: TargetWall}, Recipe: RecipeOptions{Bootstrap: 200}, Seed: 1, CalibrateHalf: half}
	for _, n := range calibrate {
		cfg.Calibrate = append(cfg.Calibrate, filepath.Join(h200Dir, n))
	}
	_, art, _, err := FitDatasets([]string{filepath.Join(h200Dir, "bench-steady")}, cfg)
	require.NoError(t, err)
	return art.Recipe
}

func h200Traffic1(t *testing.T, name string, half int) *Data {
	t.Helper()
	l, err := LoadDatasets([]string{filepath.Join(h200Dir, name)}, LoadOptions{Target: TargetWall, Selection: Selection{Half: half}})
	require.NoError(t, err)
	return l.Data
}

// The coverage of the recipe's 90% intervals on held-out traffic
// (docs/fitting.md quotes these figures). Fitted on the steady grid, its
// held-out residuals describe the grid, not the traffic, which costs what
// the grid does not measure (ragged contexts, prefix reads): decode steps
// under-cover. Calibrated across rates the spread does not transfer
// either; calibrated on one half of both runs' steps and tested on the
// other, coverage is near nominal.
func TestH200IntervalCoverage(t *testing.T) {
	const five, twelve = "traffic-azure-5rps", "traffic-azure-12rps"
	cov := func(r *fpm.Recipe, d *Data) *IntervalReport { return EvaluateIntervals(r, d, 0.9) }
	logCov := func(what string, c *IntervalReport) {
		t.Logf("%-52s all %5.1f%%  decode %5.1f%% (n=%d)  mixed %5.1f%% (n=%d)  mean width %.1f%%", what, c.Overall.Pct,
			c.ByKind["decode"].Pct, c.ByKind["decode"].N, c.ByKind["mixed"].Pct, c.ByKind["mixed"].N, c.Overall.MeanWidthPct)
	}
	plain := h200Recipe(t, nil, 0)
	a, b := h200Traffic1(t, five, 0), h200Traffic1(t, twelve, 0)
	ca, cb := cov(plain, a), cov(plain, b)
	logCov("grid residuals, 5 req/s", ca)
	logCov("grid residuals, 12 req/s", cb)
	for _, c := range []*IntervalReport{ca, cb} {
		// The decode attention term prices the traffic's ragged batches
		// (decode coverage 79-86%, misses on both sides); the mixed steps a
		// grid without mixed points composes still cost what it never
		// measured (it has no chunk at a context, so the decode rows' KV
		// walk is not priced), and their misses are above.
		mixed := c.ByKind["mixed"]
		t.Logf("mixed misses: %d above, %d below", mixed.Above, mixed.Below)
		require.Less(t, mixed.Pct, 85.0, "the grid's spread does not carry to traffic's mixed steps")
		require.Greater(t, mixed.Above, 10*mixed.Below, "traffic's mixed steps cost more than the composition: misses are above")
	}

	// Relative residuals: on the traffic the absolute error grows with the
	// step, the relative one about half as fast. Steps of both runs, split at the
	// median predicted time and its top decile.
	type res struct{ pred, abs float64 }
	var rs []res
	for _, d := range []*Data{a, b} {
		for i, f := range d.Features {
			if d.Kind(i) == "decode" {
				p := plain.PredictNs(f)
				rs = append(rs, res{p, math.Abs(d.Y[i] - p)})
			}
		}
	}
	slices.SortFunc(rs, func(x, y res) int { return cmp.Compare(x.pred, y.pred) })
	med := func(v []res) (abs, rel float64) {
		as, rl := make([]float64, len(v)), make([]float64, len(v))
		for i, r := range v {
			as[i], rl[i] = r.abs, r.abs/r.pred
		}
		sort.Float64s(as)
		sort.Float64s(rl)
		return fpm.SortedQuantile(as, 0.5), fpm.SortedQuantile(rl, 0.5)
	}
	absLo, relLo := med(rs[:len(rs)/2])
	absHi, relHi := med(rs[len(rs)*9/10:])
	t.Logf("decode |residual| median: lower half of the predictions (< %.1f ms) %.3f ms = %.2f%%; top decile (> %.1f ms) %.3f ms = %.2f%%",
		rs[len(rs)/2].pred/1e6, absLo/1e6, 100*relLo, rs[len(rs)*9/10].pred/1e6, absHi/1e6, 100*relHi)
	require.Greater(t, absHi/absLo, 1.5*relHi/relLo, "absolute errors grow with the step faster than relative ones")

	// Across rates: calibrated on one run, tested on the other.
	c512 := cov(h200Recipe(t, []string{five}, 0), b)
	c125 := cov(h200Recipe(t, []string{twelve}, 0), a)
	logCov("calibrated on 5 req/s, tested on 12 req/s", c512)
	logCov("calibrated on 12 req/s, tested on 5 req/s", c125)
	// The 12 req/s residuals carry to the smaller batches of 5 req/s; the
	// 5 req/s ones not to 12 req/s's larger ragged batches: this grid's
	// wall time pays the admission's teardown before each point, which
	// grows with its KV (the wall fit's KV cost 43 ns a token at B > 32,
	// the device fit's 31 at B > 64), and the decode walk prices a
	// ragged batch's long tail at that cost, which the 12 req/s runs'
	// steps do not pay (decode coverage 58%; 83–97% when the split regime
	// priced the tail lower).
	require.InDelta(t, 90, c125.ByKind["decode"].Pct, 7, "a calibration on the larger batches carries to the smaller")
	require.Less(t, c512.ByKind["decode"].Pct, 80.0, "the grid's teardown priced over the tails of 12 req/s")

	// On a split: half 1 of both runs calibrates, half 2 tests.
	split := h200Recipe(t, []string{five, twelve}, 1)
	both := h200Traffic1(t, five, 2)
	b2 := h200Traffic1(t, twelve, 2)
	both.Features, both.Y, both.Kinds = append(both.Features, b2.Features...), append(both.Y, b2.Y...), append(both.Kinds, b2.Kinds...)
	cs := cov(split, both)
	logCov("calibrated on half 1 of both, tested on half 2", cs)
	logCov("  of which 5 req/s", cov(split, h200Traffic1(t, five, 2)))
	logCov("  of which 12 req/s", cov(split, b2))
	require.InDelta(t, 90, cs.ByKind["decode"].Pct, 5)
	require.InDelta(t, 90, cs.Overall.Pct, 5)
}
