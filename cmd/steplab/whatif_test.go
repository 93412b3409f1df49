package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const ensemble = "../../examples/whatif/encoder-ensemble.yaml"

func TestWhatifAndSweepCLI(t *testing.T) {
	small := []string{"--set", "load.requests=100", "--set", "load.repetitions=2"}
	dir := filepath.Join(t.TempDir(), "wi")
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"help teaches", []string{"whatif", "--help"}, 0, []string{"request-window throughput", "steplab whatif examples/whatif/encoder-ensemble.yaml"}},
		{"sweep help", []string{"sweep", "--help"}, 0, []string{"--vary load.rate_rps=", "sweep.parquet"}},
		{"table", append([]string{"whatif", ensemble, "-o", dir}, small...), 0, []string{"| inline |", "| remote |", "Achieved/offered"}},
		{"existing output needs --force", append([]string{"whatif", ensemble, "-o", dir}, small...), 2, []string{"already exists"}},
		{"json", append([]string{"whatif", ensemble, "-o", dir, "--force", "--json"}, small...), 0, []string{`"window_mean_rps"`}},
		{"no output", []string{"whatif", ensemble}, 2, []string{"use -o DIR"}},
		{"bad override names the key", []string{"whatif", ensemble, "-o", dir, "--set", "load.rate_rps=-1"}, 2, []string{"load.rate_rps is -1"}},
		{"sweep", append([]string{"sweep", ensemble, "-o", filepath.Join(t.TempDir(), "sw"), "--vary", "load.rate_rps=20,40"}, small...), 0,
			[]string{"load.rate_rps", "inline", "sweep.parquet"}},
		{"sweep needs --vary", []string{"sweep", ensemble, "-o", t.TempDir()}, 2, []string{"nothing to vary"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runCLI(t, tt.args...)
			require.Equal(t, tt.code, exitCode(err), "%v\n%s", err, out)
			text := out
			if err != nil {
				text += err.Error()
			}
			for _, w := range tt.want {
				assert.Contains(t, text, w)
			}
			if tt.name == "json" {
				var a map[string]any
				require.NoError(t, json.Unmarshal([]byte(out), &a))
				assert.Equal(t, 50.0, a["offered_rps"])
			}
		})
	}
	for _, f := range []string{"audit.md", "audit.json", "manifest.json"} {
		_, err := os.Stat(filepath.Join(dir, f))
		assert.NoError(t, err, f)
	}
}

func TestWhatifBadScenarioNamesTheLine(t *testing.T) {
	src := `name: x
load: {kind: constant, rate_rps: 5, requests: 3, prompt: {kind: fixed, value: 5}, output: {kind: fixed, value: 1}}
stages:
  - {name: fe, kind: frontend, host: h, to: [j]}
  - {name: j, kind: join, host: h, to: [fe], wrokers: 2}
`
	p := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
	_, err := runCLI(t, "whatif", p, "-o", t.TempDir())
	require.Equal(t, 2, exitCode(err))
	assert.ErrorContains(t, err, "bad.yaml:5: unknown key \"wrokers\"")
}
