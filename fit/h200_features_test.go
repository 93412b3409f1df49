package fit

import (
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/features"
	"github.com/steplab/steplab/fpm"
)

// h200TrafficCompleted is the production steps of kind kind of both H200
// traffic runs with the feature columns they predate completed from their
// step_requests, target wall_time_ns.
func h200TrafficCompleted(t *testing.T, kind string) *Data {
	t.Helper()
	var steps []datasets.Step
	for _, n := range []string{"traffic-azure-5rps", "traffic-azure-12rps"} {
		d, err := datasets.Open(filepath.Join(h200Dir, n))
		require.NoError(t, err)
		all, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
		require.NoError(t, err)
		done, matched, err := features.CompleteSteps(d, all)
		require.NoError(t, err)
		require.True(t, matched)
		require.Equal(t, len(all), done)
		for _, s := range all {
			if s.Kind == kind && s.Role == datasets.RoleProduction && s.Valid {
				steps = append(steps, s)
			}
		}
	}
	d, err := DataFromSteps(steps, TargetWall)
	require.NoError(t, err)
	return d
}

// What the uniform-context grid misses on traffic (issue 14's diagnosis):
// a model fitted on the steady grid errs on traffic decode steps in
// proportion to the longest context of the batch, not to its spread or
// padding. The longest context, the batch padded to it and the graph size
// (features a uniform grid cannot tell from decode_kv_tokens) explain the
// residual: fitted on traffic itself with the attention kernel's two
// regimes (split-KV below 33 requests, one program per request above),
// they leave under 3% MAPE, where the grid's terms leave 5.6%. A model
// fitted on a grid must therefore measure ragged batches to find them.
func TestH200TrafficFeatures(t *testing.T) {
	traffic := h200TrafficCompleted(t, datasets.KindDecode)
	require.Equal(t, 8534, traffic.Len())
	for _, f := range traffic.Features {
		require.Empty(t, f.Unknown())
	}

	// The grid's model on traffic.
	grid := h200Grid(t, "bench-steady", 512)
	r, err := Linear(grid, Options{Terms: DecodeTerms, Method: MethodOLS})
	require.NoError(t, err)
	base := Evaluate(r.Model, traffic, 0).Overall
	t.Logf("grid fit (%s) on traffic: MAPE %.1f%% p90 %.1f%% bias %+.1f%%", strings.Join(DecodeTerms, ","), base.MAPE, base.P90APE, base.MeanBias)
	require.InDelta(t, 7.1, base.MAPE, 0.3)
	require.InDelta(t, 16.8, base.P90APE, 0.5)

	// Which feature the relative residual follows.
	pred := make([]float64, traffic.Len())
	for i, f := range traffic.Features {
		pred[i] = r.Model.PredictNs(f)
	}
	type corr struct {
		name string
		c    float64
	}
	var cs []corr
	for _, c := range []struct {
		name string
		of   func(fpm.Features) float64
	}{
		{"decode_max_kv", func(f fpm.Features) float64 { return f.DecodeMaxKVTokens }},
		{"max/mean context", func(f fpm.Features) float64 { return f.DecodeMaxKVTokens * f.DecodeRequests / f.DecodeKVTokens }},
		{"decode_kv_std", func(f fpm.Features) float64 { return math.Sqrt(f.DecodeKVVar) }},
		{"mean context", func(f fpm.Features) float64 { return f.DecodeKVTokens / f.DecodeRequests }},
		{"padded_batch", func(f fpm.Features) float64 { return f.PaddedBatch }},
		{"decode_requests", func(f fpm.Features) float64 { return f.DecodeRequests }},
	} {
		x := make([]float64, traffic.Len())
		res := make([]float64, traffic.Len())
		for i, f := range traffic.Features {
			x[i], res[i] = c.of(f), (traffic.Y[i]-pred[i])/traffic.Y[i]
		}
		cs = append(cs, corr{c.name, pearson(x, res)})
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].c > cs[j].c })
	for _, c := range cs {
		t.Logf("  residual correlation with %-16s %.2f", c.name, c.c)
	}
	require.Equal(t, "decode_max_kv", cs[0].name)

	// How much each feature explains, fitted on traffic itself (an upper
	// bound for a model fitted elsewhere).
	// split > 0 fits B <= split and B > split apart.
	inSample := func(terms []string, split int) Metrics {
		pred := make([]float64, traffic.Len())
		parts := map[bool][]int{}
		for i, f := range traffic.Features {
			small := split > 0 && f.DecodeRequests <= float64(split)
			parts[small] = append(parts[small], i)
		}
		for _, idx := range [][]int{parts[true], parts[false]} {
			if len(idx) == 0 {
				continue
			}
			part := traffic.Subset(idx)
			r, err := Linear(part, Options{Terms: terms, Method: MethodOLS, Relative: true})
			require.NoError(t, err)
			for k, i := range idx {
				pred[i] = r.Model.PredictNs(part.Features[k])
			}
		}
		return EvaluatePredictions(traffic, pred, 0).Overall
	}
	ragged := []string{fpm.TermConst, fpm.TermPaddedBatch, fpm.TermDecodeKVTokens, fpm.TermDecodeMaxKV, fpm.TermDecodeBatchMaxKV}
	rows := []struct {
		name  string
		terms []string
		split int
	}{
		{"grid terms", DecodeTerms, 0},
		{"+ decode_max_kv", append(DecodeTerms[:3:3], fpm.TermDecodeMaxKV), 0},
		{"+ padded_batch", append(DecodeTerms[:3:3], fpm.TermPaddedBatch), 0},
		{"+ decode_kv_std", append(DecodeTerms[:3:3], fpm.TermDecodeKVStd), 0},
		{"ragged terms", ragged, 0},
		{"grid terms, B<=32 | B>32", DecodeTerms, 32},
		{"ragged terms, B<=32 | B>32", ragged, 32},
	}
	got := map[string]Metrics{}
	for _, row := range rows {
		m := inSample(row.terms, row.split)
		got[row.name] = m
		t.Logf("in-sample on traffic, %-28s MAPE %.1f%% p90 %.1f%%", row.name, m.MAPE, m.P90APE)
	}
	require.Less(t, got["+ decode_max_kv"].MAPE, got["grid terms"].MAPE-0.7)
	require.Less(t, got["+ decode_max_kv"].MAPE, got["+ decode_kv_std"].MAPE)
	require.Less(t, got["+ decode_max_kv"].MAPE, got["+ padded_batch"].MAPE)
	require.Less(t, got["ragged terms, B<=32 | B>32"].MAPE, 3.0)
	require.Less(t, got["ragged terms, B<=32 | B>32"].P90APE, 6.0)
	require.Greater(t, got["grid terms, B<=32 | B>32"].MAPE, 4.0, "the regimes alone do not explain it")
}

// Mixed traffic steps (a new prompt riding with decodes; no prefix hits in
// this trace) are eager and launch-bound at small sizes: two steps of a
// 209-token prompt with 3 decodes took 19 and 36 ms of device time, so no
// composition feature brings them near the 5% target on this capture. The grid's prefill and
// decode points, which never mixed the two, miss them further.
func TestH200TrafficMixed(t *testing.T) {
	mixed := h200TrafficCompleted(t, datasets.KindMixed)
	require.Equal(t, 730, mixed.Len())
	var rows []datasets.Step
	for _, s := range h200Load(t, "bench-steady").steps {
		if s.Role == datasets.RoleMeasured && s.Valid {
			rows = append(rows, s)
		}
	}
	grid, err := DataFromSteps(rows, TargetWall)
	require.NoError(t, err)
	terms := []string{fpm.TermConst, fpm.TermPrefillStep, fpm.TermPrefillTokens, fpm.TermPrefillAttn,
		fpm.TermDecodeRequests, fpm.TermDecodeKVTokens}
	r, err := Linear(grid, Options{Terms: terms, Method: MethodOLS, Relative: true})
	require.NoError(t, err)
	m := Evaluate(r.Model, mixed, 0).Overall
	t.Logf("grid fit (%s) on traffic mixed steps: MAPE %.1f%% p90 %.1f%% bias %+.1f%%", strings.Join(terms, ","), m.MAPE, m.P90APE, m.MeanBias)
	all := []string{fpm.TermConst, fpm.TermPrefillTokens, fpm.TermPrefillAttn, fpm.TermPrefillRequests,
		fpm.TermDecodeRequests, fpm.TermDecodeKVTokens, fpm.TermDecodeMaxKV, fpm.TermDecodeBatchMaxKV}
	r, err = Linear(mixed, Options{Terms: all, Method: MethodOLS, Relative: true})
	require.NoError(t, err)
	in := Evaluate(r.Model, mixed, 0).Overall
	t.Logf("in-sample on traffic mixed steps (%s): MAPE %.1f%% p90 %.1f%%", strings.Join(all, ","), in.MAPE, in.P90APE)
	require.Greater(t, m.MAPE, in.MAPE)
	require.Greater(t, in.MAPE, 5.0, "the composition does not explain mixed steps on this capture")
}

func pearson(x, y []float64) float64 {
	n := float64(len(x))
	var sx, sy, sxx, syy, sxy float64
	for i := range x {
		sx, sy = sx+x[i], sy+y[i]
		sxx, syy, sxy = sxx+x[i]*x[i], syy+y[i]*y[i], sxy+x[i]*y[i]
	}
	return (sxy - sx*sy/n) / math.Sqrt((sxx-sx*sx/n)*(syy-sy*sy/n))
}
