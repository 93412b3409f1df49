package report

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

// writeSteps writes a dataset whose steps are decode steps of the given
// wall times (none: an empty steps table; nil: no steps table at all).
func writeSteps(t *testing.T, wallNs []int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	w, err := datasets.Create(dir, datasets.Manifest{Name: "tiny", Source: datasets.Source{Kind: "simulate"},
		Hardware: &datasets.Hardware{GPUName: "H200"}}, datasets.CreateOptions{})
	require.NoError(t, err)
	if wallNs != nil {
		tw, err := datasets.NewTableWriter[datasets.Step](w, datasets.TableSteps, datasets.TableOptions{})
		require.NoError(t, err)
		for i, ns := range wallNs {
			at := int64(i) * 1_000_000
			require.NoError(t, tw.Append(datasets.Step{StepID: int64(i), Kind: "decode", Role: "production", Valid: true, NumDecodeRequests: 1,
				SumDecodeKVTokens: 100, WallTimeNs: ns, GPUTimeNs: ns, TScheduleStart: at, TOutput: at + ns, TUpdateEnd: at + ns}))
		}
		require.NoError(t, tw.Close())
	}
	require.NoError(t, w.Close())
	return dir
}

// writeJSON writes a run directory holding one JSON file.
func writeRun(t *testing.T, file, body string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644))
	return dir
}

// TestDegenerateData: data a figure cannot show gives a page with a note
// in the figure's place (or no figure), never a panic or an error.
func TestDegenerateData(t *testing.T) {
	for _, tc := range []struct {
		name  string
		paths func(t *testing.T) []string
		model string
		// note is a text the page must hold ("" for none).
		note string
		figs int
	}{
		{"zero wall times on the log axis", func(t *testing.T) []string { return []string{writeSteps(t, []int64{0, 0, 0})} }, "",
			"nothing can be drawn on the log-scale time axis", 0},
		{"zero wall times, with a model", func(t *testing.T) []string { return []string{writeSteps(t, []int64{0, 0, 0})} },
			"../datasets/h200/models/steady-decode.json", "nothing can be drawn on the log-scale time axis", 0},
		{"unknown wall times", func(t *testing.T) []string { return []string{writeSteps(t, []int64{-1, -1})} }, "", "", 0},
		{"one row", func(t *testing.T) []string { return []string{writeSteps(t, []int64{7_000_000})} }, "", "", 1},
		{"one row, with a model", func(t *testing.T) []string { return []string{writeSteps(t, []int64{7_000_000})} },
			"../datasets/h200/models/steady-decode.json", "", 3},
		{"some zeros among positive times", func(t *testing.T) []string { return []string{writeSteps(t, []int64{0, 5_000_000, 6_000_000})} }, "", "", 1},
		{"empty steps table", func(t *testing.T) []string { return []string{writeSteps(t, []int64{})} }, "", "", 0},
		{"no steps table", func(t *testing.T) []string { return []string{writeSteps(t, nil)} }, "", "", 0},
		{"what-if run without placements", func(t *testing.T) []string {
			return []string{writeRun(t, "audit.json", `{"scenario": "empty", "stages": ["a"], "placements": []}`)}
		}, "", "the run has no placements", 0},
		{"what-if run with zero throughput", func(t *testing.T) []string {
			return []string{writeRun(t, "audit.json", `{"scenario": "idle", "stages": ["a"], "placements": [{"placement": "p", "stages": [{"p90_ms": 0}]}]}`)}
		}, "", "", 2},
		{"sweep without points", func(t *testing.T) []string {
			return []string{writeRun(t, "sweep.json", `{"scenario": "empty", "vary": [{"key": "load.rate_rps"}], "points": []}`)}
		}, "", "", 0},
		{"step replay without fields", func(t *testing.T) []string {
			return []string{writeRun(t, "summary.json", `{"primary_field": "gpu_time_ns", "fields": []}`)}
		}, "", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.model != "" {
				if _, err := os.Stat(tc.model); err != nil {
					t.Skip("bundled model not present:", err)
				}
			}
			var buf bytes.Buffer
			res, err := Write(&buf, Options{Paths: tc.paths(t), Model: tc.model})
			require.NoError(t, err)
			require.Equal(t, tc.figs, res.Figures-countNotes(buf.String()), "figures drawn")
			if tc.note != "" {
				require.Contains(t, buf.String(), tc.note)
			}
		})
	}
}

func countNotes(html string) int { return bytes.Count([]byte(html), []byte(`class="note fignote"`)) }
