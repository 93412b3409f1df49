package fit

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
	"github.com/stretchr/testify/require"
)

// Must-show (c): each kind of degenerate input gives its own error, which
// names the term or row; none gives a model.
func TestDegenerateInputs(t *testing.T) {
	base := func() *Data { return synthData(21, 100, synthTerms, synthTrue, 0.02) }
	cases := []struct {
		name  string
		data  func() *Data
		terms []string
		want  error
		msg   string
	}{
		{"empty", func() *Data { return &Data{} }, synthTerms, ErrEmptySelection, "empty selection"},
		{"too few rows", func() *Data { return base().Subset([]int{0, 1, 2, 3, 4, 5, 6, 7, 8}) }, synthTerms, ErrTooFewRows, "9 rows for 5 terms; need at least 10"},
		{"too few rows (min 5)", func() *Data { return base().Subset([]int{0, 1, 2, 3}) }, []string{"const"}, ErrTooFewRows, "need at least 5"},
		{"NaN timing", func() *Data { d := base(); d.Y[42] = math.NaN(); return d }, synthTerms, ErrBadTarget, "at row 42 (step_id 1042): timing is NaN"},
		{"Inf timing", func() *Data { d := base(); d.Y[3] = math.Inf(1); return d }, synthTerms, ErrBadTarget, "at row 3 (step_id 1003)"},
		{"negative timing", func() *Data { d := base(); d.Y[7] = -1; return d }, synthTerms, ErrBadTarget, "at row 7 (step_id 1007): timing is -1 ns"},
		{"NaN feature", func() *Data { d := base(); d.Features[5].DecodeKVTokens = math.NaN(); return d }, synthTerms, ErrBadFeature, "(terms decode_kv_tokens) at row 5"},
		{"all-zero term", base, append([]string{"new_requests"}, synthTerms...), ErrZeroColumn, "(terms new_requests)"},
		{"constant term", func() *Data {
			d := base()
			for i := range d.Features {
				d.Features[i].NewRequests = 3
			}
			return d
		}, append([]string{"new_requests"}, synthTerms...), ErrConstantColumn, "(terms new_requests)"},
		{"rank deficient", base, append([]string{"padded_batch"}, synthTerms...), ErrRankDeficient, "(terms padded_batch, decode_requests)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Linear(c.data(), Options{Terms: c.terms})
			require.Nil(t, res)
			require.ErrorIs(t, err, c.want)
			require.ErrorContains(t, err, c.msg)
			for _, other := range []error{ErrEmptySelection, ErrTooFewRows, ErrBadTarget, ErrBadFeature, ErrZeroColumn, ErrConstantColumn, ErrRankDeficient} {
				if other != c.want {
					require.False(t, errors.Is(err, other), "also %v", other)
				}
			}
			var de *DataError
			require.ErrorAs(t, err, &de)
			// The same checks guard the low-level solvers.
			if ds, derr := c.data().design(c.terms, false); derr == nil {
				_, err := NNLS(ds)
				require.ErrorIs(t, err, c.want)
				_, err = OLS(ds)
				require.ErrorIs(t, err, c.want)
				_, err = Huber(ds, HuberOptions{})
				require.ErrorIs(t, err, c.want)
			}
		})
	}
}

func TestDropPolicy(t *testing.T) {
	d := synthData(22, 200, synthTerms, synthTrue, 0.02)
	for i := range d.Features {
		d.Features[i].NewRequests = 1
	}
	terms := append([]string{"new_requests", "new_req_tokens"}, synthTerms...)
	res, err := Linear(d, Options{Terms: terms, Degenerate: DegenerateDrop})
	require.NoError(t, err)
	require.Equal(t, []DroppedTerm{
		{"new_requests", "constant on every row (indistinguishable from const); steps that admit requests beside running ones (mixed points) would identify it"},
		{"new_req_tokens", "zero on every row; mixed points at a context (new prompts beside chunks of running ones) would identify it"}}, res.Dropped)
	require.Equal(t, synthTerms, res.Model.Terms)
	// Of collinear terms the later one goes: padded_batch equals
	// decode_requests on this data.
	res, err = Linear(d, Options{Terms: append([]string{"padded_batch"}, synthTerms...), Degenerate: DegenerateDrop})
	require.NoError(t, err)
	require.Equal(t, []DroppedTerm{{"decode_requests", "a linear combination of padded_batch on these rows"}}, res.Dropped)
	require.Equal(t, []string{"padded_batch", "const", "prefill_tokens", "prefill_attn", "decode_kv_tokens"}, res.Model.Terms)
	_, err = Linear(d, Options{Degenerate: "ignore"})
	require.ErrorContains(t, err, `policy "ignore"`)
	_, err = Linear(d, Options{Method: "lasso"})
	require.ErrorContains(t, err, `unknown method "lasso"`)
	// Too few rows is judged on the terms that survive the drop: 12 rows
	// are too few for the 8 terms named but enough for the 6 kept.
	res, err = Linear(d.Subset([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}), Options{Terms: append(slices.Clone(terms), "prefill_kv_tokens"), Degenerate: DegenerateDrop})
	require.NoError(t, err)
	require.Len(t, res.Model.Terms, 6)
	_, err = Linear(d.Subset([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}), Options{Terms: append(slices.Clone(terms), "prefill_kv_tokens"), Degenerate: DegenerateDrop})
	require.ErrorIs(t, err, ErrTooFewRows)
	require.ErrorContains(t, err, "11 rows for 6 terms")
}

// The auto policy (the zero value) drops what the default basis cannot
// identify and holds named terms strictly; terms whose column the source
// left Unknown are never priced.
func TestAutoPolicyAndUnrecorded(t *testing.T) {
	d := synthData(23, 200, synthTerms, synthTrue, 0.02)
	res, err := Linear(d, Options{})
	require.NoError(t, err)
	require.Equal(t, []DroppedTerm{
		{"new_requests", "zero on every row; steps that admit requests beside running ones (mixed points) would identify it"},
		{"new_req_tokens", "zero on every row; mixed points at a context (new prompts beside chunks of running ones) would identify it"},
	}, res.Dropped)
	_, err = Linear(d, Options{Terms: fpm.DefaultTerms})
	require.ErrorIs(t, err, ErrZeroColumn)
	_, err = Linear(d, Options{Degenerate: DegenerateError})
	require.ErrorIs(t, err, ErrZeroColumn)

	for i := range d.Features {
		d.Features[i].NewRequests = float64(i % 3)
	}
	d.Unrecorded = map[string]int{"new_requests": 7}
	res, err = Linear(d, Options{})
	require.NoError(t, err)
	require.Contains(t, res.Dropped, DroppedTerm{"new_requests", "not recorded by the source on 7 of 200 rows"})
	_, err = Linear(d, Options{Terms: append([]string{"new_requests"}, synthTerms...)})
	require.ErrorIs(t, err, ErrBadFeature)
	require.ErrorContains(t, err, "(terms new_requests): the source did not record it on 7 of 200 rows")
	_, err = Linear(d, Options{Terms: synthTerms})
	require.NoError(t, err, "an unrecorded term not asked for is no error")
}

func TestSelectionErrors(t *testing.T) {
	steps := []datasets.Step{
		{StepID: 1, Role: datasets.RoleScaffolding, Kind: datasets.KindDecode, Valid: true, GPUTimeNs: 5},
		{StepID: 2, Role: datasets.RoleMeasured, Kind: datasets.KindPrefill, Valid: true, GPUTimeNs: 5},
		{StepID: 3, Role: datasets.RoleProduction, Kind: datasets.KindDecode, Valid: false, GPUTimeNs: 5},
	}
	_, err := Select(steps, Selection{Kinds: []string{datasets.KindDecode}})
	require.ErrorIs(t, err, ErrEmptySelection)
	require.ErrorContains(t, err, "no rows of 3 left: 1 removed by role")
	require.ErrorContains(t, err, "1 by kind")
	require.ErrorContains(t, err, "1 invalid")
	_, err = Select(steps, Selection{Roles: []string{datasets.RoleScaffolding}})
	require.ErrorContains(t, err, `role "scaffolding" is never fitted`)
	_, err = Select(steps, Selection{Kinds: []string{"warmup"}})
	require.ErrorContains(t, err, `unknown kind "warmup"`)
	got, err := Select(steps, Selection{Kinds: []string{datasets.KindDecode}, AllowInvalid: true})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.EqualValues(t, 3, got[0].StepID)
	got, err = Select(steps, Selection{})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.True(t, Selection{}.Keep(&steps[1]))
	require.False(t, Selection{}.Keep(&steps[0]))
	rec := Selection{}.Record("steady_state_second_step")
	require.Equal(t, fpm.Selection{Roles: []string{"measured", "production"}, Kinds: []string{"prefill", "decode", "mixed"}, Valid: true, Policy: "steady_state_second_step"}, rec)

	// Unknown timings name the step.
	_, err = DataFromSteps([]datasets.Step{{StepID: 9, GPUTimeNs: 10, WallTimeNs: 12}, {StepID: 10, GPUTimeNs: -1, WallTimeNs: 0}}, TargetAuto)
	require.ErrorIs(t, err, ErrBadTarget)
	require.ErrorContains(t, err, "at row 1 (step_id 10): wall_time_ns is 0")
	_, err = DataFromSteps(steps, TargetGPU)
	require.NoError(t, err)
	_, err = DataFromSteps(nil, TargetGPU)
	require.ErrorIs(t, err, ErrEmptySelection)
	_, err = DataFromSteps(steps, "narrow")
	require.ErrorContains(t, err, `unknown target "narrow"`)
}
