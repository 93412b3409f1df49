package fit

import (
	"testing"

	"github.com/steplab/steplab/fpm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A step above the largest batch or context the grid measured is flagged
// per step and counted; one inside is not. A ragged step whose mean is
// inside but whose longest request is beyond the largest context counts.
func TestBeyondAxes(t *testing.T) {
	res, err := FitRecipe(decodeData(t, benchGrid(2, 1)), RecipeOptions{Bootstrap: 20, Seed: 1})
	require.NoError(t, err)
	step := func(b, mean, longest float64) fpm.Features {
		return fpm.Features{DecodeRequests: b, DecodeKVTokens: b * mean, DecodeMaxKVTokens: longest, PaddedBatch: b}
	}
	for _, c := range []struct {
		name string
		f    fpm.Features
		want []string
	}{
		{"inside", step(16, 1000, 1000), nil},
		{"on the largest nodes", step(64, 8192, 8192), nil},
		{"batch beyond", step(512, 1000, 1000), []string{"decode_requests"}},
		{"context beyond", step(4, 16384, 16384), []string{fpm.CoordKVPerRequest}},
		{"longest request beyond", step(4, 2000, 12000), []string{fpm.CoordKVPerRequest}},
		{"both", step(1024, 20000, 20000), []string{"decode_requests", fpm.CoordKVPerRequest}},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, BeyondAxes(res.Model, c.f))
		})
	}
	d := &Data{Features: []fpm.Features{step(16, 1000, 1000), step(512, 1000, 1000), step(1024, 20000, 20000)}, Y: []float64{1, 1, 1}}
	b := countBeyond(res.Model, d)
	require.NotNil(t, b)
	assert.Equal(t, 2, b.N)
	assert.Equal(t, map[string]int{"decode_requests": 2, fpm.CoordKVPerRequest: 1}, b.ByAxis)
	assert.Contains(t, b.Warning(d.Len()), "2 of 3 steps lie beyond")
	assert.Nil(t, countBeyond(res.Model, d.Subset([]int{0})), "none beyond: nothing to count")
	lin, err := fpm.NewLinear([]string{fpm.TermConst}, []float64{1})
	require.NoError(t, err)
	assert.Nil(t, BeyondAxes(lin, step(1024, 20000, 20000)), "a model with no grid has nothing to be beyond")
}

// eval warns when coverage strays more than 5 points from nominal.
func TestIntervalReportWarning(t *testing.T) {
	for _, c := range []struct {
		covered, n int
		want       string
	}{{90, 100, ""}, {85, 100, ""}, {95, 100, ""}, {84, 100, "too narrow"}, {43, 100, "covered 43.0%"}, {96, 100, "too wide"}, {0, 0, ""}} {
		r := &IntervalReport{Level: 0.9, Overall: Coverage{N: c.n, Covered: c.covered}}
		r.Overall.Finish()
		if c.want == "" {
			assert.Empty(t, r.Warning(), "%d of %d", c.covered, c.n)
		} else {
			assert.Contains(t, r.Warning(), c.want, "%d of %d", c.covered, c.n)
		}
	}
}
