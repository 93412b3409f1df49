package fit

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCommittedBounds is the CI gate: every bound of checks.yaml over the
// committed datasets holds. Run with -v for the figures.
func TestCommittedBounds(t *testing.T) {
	r, err := CheckBounds("../checks.yaml")
	require.NoError(t, err)
	for _, e := range r.Evaluations {
		line := ""
		if e.Intervals != nil {
			for _, k := range sortedKeys(e.Intervals.ByKind) {
				c := e.Intervals.ByKind[k]
				line += fmt.Sprintf(" %s %.1f%%", k, c.Pct)
			}
		}
		t.Logf("%s: %s, %d rows, MAPE %.2f%%; coverage:%s", e.Name, e.Model, e.Report.Overall.Count, e.Report.Overall.MAPE, line)
	}
	var buf bytes.Buffer
	r.WriteTable(&buf, false)
	t.Log("\n" + buf.String())
	require.True(t, r.Passed, "%v", r.Err())
}

// boundsFixture writes a synthetic decode dataset and a bounds file over it.
func boundsFixture(t *testing.T, bounds string) string {
	t.Helper()
	dir := t.TempDir()
	writeDataset(t, filepath.Join(dir, "ds"), synthDecode(300, 11), "")
	p := filepath.Join(dir, "checks.yaml")
	require.NoError(t, os.WriteFile(p, []byte(bounds), 0o644))
	return p
}

func TestBoundsBreachFailsWithJUnit(t *testing.T) {
	p := boundsFixture(t, `version: 1
checks:
  - name: synth
    model: {fit: {datasets: [ds], form: linear, terms: [const, decode_requests, decode_kv_tokens], bootstrap: 20}}
    data: [ds]
    bounds:
      - {metric: mape_pct, scope: overall, max: 0.01, target: 0.005}
      - {metric: coverage_pct, scope: kind=decode, min: 50, max: 100, target: [85, 95]}
      - {metric: mape_pct, scope: kind=mixed, max: 100}
`)
	r, err := CheckBounds(p)
	require.NoError(t, err)
	require.False(t, r.Passed)
	err = r.Err()
	require.True(t, errors.Is(err, ErrCheckFailed))
	fails := map[string]bool{}
	for _, c := range r.Failures() {
		fails[c.Name] = true
	}
	require.Equal(t, map[string]bool{"synth mape_pct overall": true, "synth mape_pct kind=mixed": true}, fails,
		"the tight MAPE bound, and a scope with no rows, fail; the coverage range holds")
	for _, c := range r.Checks {
		if c.Metric == "coverage_pct" {
			require.Contains(t, c.Detail, "target 85..95")
		}
	}
	var buf bytes.Buffer
	require.NoError(t, r.WriteJUnit(&buf))
	var back JUnitSuites
	require.NoError(t, xml.Unmarshal(buf.Bytes(), &back))
	require.Equal(t, 4, back.Tests, "one testcase per bound side")
	require.Equal(t, 2, back.Failures)
}

// oneCheck is a bounds file of one check named a, with the given model
// and bounds (flow YAML).
func oneCheck(model, bounds string) string {
	return "version: 1\nchecks:\n  - {name: a, model: " + model + ", data: [d], bounds: [" + bounds + "]}\n"
}

func TestParseBoundsRefusesBadFiles(t *testing.T) {
	const art = "{artifact: m.json}"
	_, err := ParseBounds([]byte(oneCheck(art, "{metric: mape_pct, scope: overall, max: 5}")), ".")
	require.NoError(t, err)
	cases := []struct{ name, yaml, want string }{
		{"version", "version: 2\nchecks: []\n", "version 2"},
		{"no checks", "version: 1\n", "no checks"},
		{"unknown key", oneCheck(art, "{metric: mape_pct, scope: overall, max: 5, extra: 1}"), "extra"},
		{"two models", oneCheck("{artifact: m.json, prior: {hardware: H200, shape: Llama-3.1-8B}}", "{metric: mape_pct, scope: overall, max: 5}"), "exactly one"},
		{"unknown metric", oneCheck(art, "{metric: rmse, scope: overall, max: 5}"), "metric \"rmse\""},
		{"no gate", oneCheck(art, "{metric: mape_pct, scope: overall, target: 3}"), "give max, min or both"},
		{"bad scope", oneCheck(art, "{metric: mape_pct, scope: decode, max: 3}"), "scope \"decode\""},
		{"region on an error metric", oneCheck(art, "{metric: mape_pct, scope: region=interpolated, max: 3}"), "coverage_pct only"},
		{"bad target", oneCheck(art, "{metric: coverage_pct, scope: overall, min: 80, target: [95, 85]}"), "target"},
		{"prior without a shape", oneCheck("{prior: {hardware: H200}}", "{metric: mape_pct, scope: overall, max: 5}"), "name the hardware and the shape"},
		{"ops prior on a hardware", oneCheck("{prior: {hardware: H200, shape: Llama-3.1-8B, ops: h200-sxm-vllm-0.24.0}}", "{metric: mape_pct, scope: overall, max: 5}"), "leave hardware out"},
		{"engine without ops", oneCheck("{prior: {hardware: H200, shape: Llama-3.1-8B, engine: e.json}}", "{metric: mape_pct, scope: overall, max: 5}"), "set ops"},
		{"duplicate name", `version: 1
checks:
  - {name: a, model: {artifact: m.json}, data: [d], bounds: [{metric: mape_pct, scope: overall, max: 5}]}
  - {name: a, model: {artifact: m.json}, data: [d], bounds: [{metric: mape_pct, scope: overall, max: 5}]}
`, "unique"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseBounds([]byte(c.yaml), ".")
			require.ErrorContains(t, err, c.want)
		})
	}
}

func FuzzParseBounds(f *testing.F) {
	f.Add([]byte("version: 1\nchecks:\n  - {name: a, model: {artifact: m.json}, data: [d], bounds: [{metric: mape_pct, scope: overall, max: 5, target: [1, 2]}]}\n"))
	f.Add([]byte("version: 1\nchecks:\n  - {name: a, model: {prior: {hardware: H200, shape: x}}, data: [d], bounds: [{metric: coverage_pct, scope: region=interpolated, min: 5}]}\n"))
	f.Add([]byte("version: 2\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		bf, err := ParseBounds(b, ".")
		if err != nil {
			return
		}
		for _, c := range bf.Checks {
			if c.Name == "" || len(c.Data) == 0 || len(c.Bounds) == 0 {
				t.Fatalf("accepted an incomplete check: %+v", c)
			}
			for _, b := range c.Bounds {
				if b.Max == nil && b.Min == nil {
					t.Fatalf("accepted a bound without a gate: %+v", b)
				}
			}
		}
	})
}

func TestPriorSpecBuild(t *testing.T) {
	m, name, err := PriorSpec{Hardware: "H200", Shape: "Llama-3.1-8B"}.Build(".")
	require.NoError(t, err)
	require.Equal(t, "roofline(H200-SXM, Llama-3.1-8B)", name)
	require.Greater(t, m.PredictNs(dec(8, 1024)), 0.0)
	_, _, err = PriorSpec{Shape: "Llama-3.1-8B", Ops: h200OpsDatabase, Engine: filepath.Join(h200Dir, "models", "steady-decode.json")}.Build(".")
	require.ErrorContains(t, err, "want an ops model artifact")
	_, _, err = PriorSpec{Shape: "Llama-3.1-8B", Ops: "no-such-database"}.Build(".")
	require.ErrorContains(t, err, "no-such-database")
}
