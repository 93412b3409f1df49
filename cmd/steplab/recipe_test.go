package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fit"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/pricing"
)

// fit with no form flags fits the recipe; eval reports the coverage of its
// intervals; a calibration split and --half keep calibration and test
// apart; linear flags without --form select the linear form.
func TestFitRecipeEvalCoverageCLI(t *testing.T) {
	dir := t.TempDir()
	train := stepsDataset(t, filepath.Join(dir, "train"), decodeSteps(400, 1, nil), "")
	held := stepsDataset(t, filepath.Join(dir, "held"), decodeSteps(400, 2, func(i int, s *datasets.Step) {
		s.StepID += 1000
		s.WallTimeNs = s.WallTimeNs * 11 / 10 // traffic costs 10% more
	}), "")
	mpath := filepath.Join(dir, "recipe.json")
	out, err := runCLI(t, "fit", train, "-o", mpath, "--bootstrap", "20", "--cv", "0")
	require.NoError(t, err, out)
	require.Contains(t, out, "decode: 400 rows, priced by linear")
	_, a, err := pricing.Load(mpath)
	require.NoError(t, err)
	require.Equal(t, fpm.FormRecipe, a.Form)

	out, err = runCLI(t, "eval", mpath, held, "--json")
	require.NoError(t, err, out)
	var ev fit.EvalReport
	require.NoError(t, json.Unmarshal([]byte(out), &ev))
	require.NotNil(t, ev.Intervals)
	require.Equal(t, 0.9, ev.Intervals.Level)
	require.Less(t, ev.Intervals.ByKind["decode"].Pct, 50.0, "the training spread misses the 10% extra cost")
	require.Contains(t, ev.Warnings, ev.Intervals.Warning(), "eval warns in --json when coverage is outside nominal ± 5")
	require.Contains(t, ev.Intervals.Warning(), "too narrow")

	cpath := filepath.Join(dir, "calibrated.json")
	out, err = runCLI(t, "fit", train, "-o", cpath, "--bootstrap", "20", "--cv", "0", "--calibrate", held, "--calibrate-half", "1")
	require.NoError(t, err, out)
	require.Contains(t, out, "(half 1 of the rows)")
	out, err = runCLI(t, "eval", cpath, held, "--half", "2")
	require.NoError(t, err, out)
	require.Contains(t, out, "prediction intervals at 90% nominal")
	out, err = runCLI(t, "eval", cpath, held, "--half", "2", "--json")
	require.NoError(t, err, out)
	require.NoError(t, json.Unmarshal([]byte(out), &ev))
	require.InDelta(t, 90, ev.Intervals.ByKind["decode"].Pct, 7, "calibrated on half 1, tested on half 2")
	require.Equal(t, 2, ev.Selection.Half)

	lpath := filepath.Join(dir, "linear.json")
	_, err = runCLI(t, "fit", train, "-o", lpath, "--terms", "decode", "--cv", "0", "--bootstrap", "0")
	require.NoError(t, err)
	_, a, err = pricing.Load(lpath)
	require.NoError(t, err)
	require.Equal(t, fpm.FormLinear, a.Form, "--terms without --form: linear")

	for _, bad := range [][]string{
		{"fit", train, "-o", lpath, "--form", "grid", "--terms", "decode"},
		{"fit", train, "-o", lpath, "--form", "linear", "--calibrate", held},
		{"fit", train, "-o", lpath, "--calibrate-half", "1"},
		{"fit", train, "-o", lpath, "--level", "90"},
		{"eval", mpath, held, "--half", "3"},
	} {
		_, err := runCLI(t, bad...)
		require.Equal(t, 2, exitCode(err), "%v", bad)
	}
}

// check --bounds runs a bounds file: exit 0 when every bound holds, 1 with
// a JUnit report when one is breached, 2 on a bad file or mixed usage.
func TestCheckBoundsCLI(t *testing.T) {
	dir := t.TempDir()
	stepsDataset(t, filepath.Join(dir, "ds"), decodeSteps(300, 3, nil), "")
	write := func(name, maxMAPE string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(`version: 1
checks:
  - name: synth
    model: {fit: {datasets: [ds], bootstrap: 20}}
    data: [ds]
    bounds:
      - {metric: mape_pct, scope: overall, max: `+maxMAPE+`, target: 1}
      - {metric: coverage_pct, scope: overall, min: 50, target: [85, 95]}
`), 0o644))
		return p
	}
	junit := filepath.Join(dir, "report.xml")
	out, err := runCLI(t, "check", "--bounds", write("ok.yaml", "10"), "--junit", junit)
	require.NoError(t, err, out)
	require.Contains(t, out, "PASS: 2 checks")
	out, err = runCLI(t, "check", "--bounds", write("tight.yaml", "0.1"), "--junit", junit)
	require.Equal(t, 1, exitCode(err), out)
	require.Contains(t, out, "FAILED")
	b, err := os.ReadFile(junit)
	require.NoError(t, err)
	var suites fit.JUnitSuites
	require.NoError(t, xml.Unmarshal(b, &suites))
	require.Equal(t, 2, suites.Tests)
	require.Equal(t, 1, suites.Failures)

	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("version: 1\nchecks:\n  - {name: x}\n"), 0o644))
	for _, args := range [][]string{
		{"check", "--bounds", bad},
		{"check", "--bounds", filepath.Join(dir, "missing.yaml")},
		{"check", "--bounds", write("ok.yaml", "10"), "model.json", "ds"},
		{"check", "--bounds", write("ok.yaml", "10"), "--max-mape", "5"},
		{"check", "model.json"},
	} {
		_, err := runCLI(t, args...)
		require.Equal(t, 2, exitCode(err), "%v", args)
	}
}
