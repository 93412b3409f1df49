package main

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/steplab/steplab/fpm"
	"github.com/stretchr/testify/require"
)

// A model with no residuals and no coefficient covariance has intervals of
// zero width: simulate prints none (no "x [x, x]") and says why; a model
// with residuals prints its interval.
func TestSimulateNeverPrintsZeroWidthInterval(t *testing.T) {
	dir := t.TempDir()
	m, err := fpm.NewLinear([]string{fpm.TermConst, fpm.TermPrefillTokens, fpm.TermDecodeRequests, fpm.TermDecodeKVTokens},
		[]float64{5e6, 3e4, 3e4, 90})
	require.NoError(t, err)
	flat := filepath.Join(dir, "flat.json")
	require.NoError(t, fpm.LinearArtifact(m).Save(flat))
	m.Residuals = &fpm.ResidualQuantiles{Scale: fpm.ScaleRelative, P: []float64{0.05, 0.5, 0.95}, Values: []float64{-0.1, 0, 0.1}}
	wide := filepath.Join(dir, "wide.json")
	require.NoError(t, fpm.LinearArtifact(m).Save(wide))
	interval := regexp.MustCompile(`\d \[\d`)
	zero := regexp.MustCompile(`(\d+\.\d+) \[(\d+\.\d+), (\d+\.\d+)\]`)

	out, err := runCLI(t, "simulate", "--set", "fpm="+flat, "--set", "workload.limit=20", "-o", filepath.Join(dir, "flat"))
	require.NoError(t, err, out)
	require.Contains(t, out, "no uncertainty recorded: the model "+flat+" is a model that records no residuals")
	require.NotRegexp(t, interval, out, "no interval printed")

	out, err = runCLI(t, "simulate", "--set", "fpm="+wide, "--set", "workload.limit=20", "-o", filepath.Join(dir, "wide"))
	require.NoError(t, err, out)
	require.NotContains(t, out, "no uncertainty recorded")
	require.Regexp(t, interval, out, "an interval is printed")
	for _, g := range zero.FindAllStringSubmatch(out, -1) {
		require.False(t, g[2] == g[3], "a printed interval has width: %s", g[0])
	}
}
