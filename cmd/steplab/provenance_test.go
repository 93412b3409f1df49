package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fit"
	"github.com/steplab/steplab/pricing"
)

// The committed H200 artifact replaying the committed RTX 4090 run says
// so, naming both GPUs, and a copy without the record (as artifacts fitted
// before steplab kept one) says its provenance is unknown, in the printed
// report and in the JSON summary's warnings.
func TestReplayProvenanceCLI(t *testing.T) {
	dir := t.TempDir()
	rtx := filepath.Join(dir, "rtx")
	out, err := runCLI(t, "import", "vllm-requests", "../../datasets/importers/testdata/llmservingsim-rtx4090-llama-3.1-8b", "-o", rtx)
	require.NoError(t, err, out)
	const recorded = "../../datasets/h200/models/steady-gpu.json"
	_, art, err := pricing.Load(recorded)
	require.NoError(t, err)
	require.Equal(t, []catalog.FittedOn{{GPU: "H200-SXM", Model: "Llama-3.1-8B", WeightDType: "bf16", KVDType: "bf16"}}, art.Training.FittedOn,
		"the committed artifact records its training dataset's setting")
	art.Training.FittedOn = nil
	unrecorded := filepath.Join(dir, "steady-gpu.json")
	require.NoError(t, art.Save(unrecorded))

	for _, tc := range []struct {
		name, model, want string
	}{
		{"no record", unrecorded, "warning: fpm " + unrecorded + " records no training.fitted_on (fitted before steplab recorded it): " +
			"its provenance is unknown; applied to RTX-4090 / Llama-3.1-8B bf16\n"},
		{"fitted on H200", recorded, "warning: fpm " + recorded + " was fitted on H200-SXM / Llama-3.1-8B bf16; " +
			"applied to RTX-4090 / Llama-3.1-8B bf16: its error there is unmeasured\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr := filepath.Join(t.TempDir(), "rr")
			out, stderr, err := runCLILogged(t, "replay", "requests", tc.model, rtx, "-o", rr)
			require.NoError(t, err, out)
			require.Contains(t, out, tc.want)
			require.Contains(t, stderr, "model fitted elsewhere")
			var sum struct{ Warnings []string }
			b, err := os.ReadFile(filepath.Join(rr, "summary.json"))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, &sum))
			require.Contains(t, sum.Warnings, strings.TrimPrefix(strings.TrimSuffix(tc.want, "\n"), "warning: "))
		})
	}
}

// An artifact that records H200-SXM priced on an H100 says so in the
// simulated dataset's manifest notes, and eval of it on that dataset warns.
func TestSimulateEvalProvenanceCLI(t *testing.T) {
	dir := t.TempDir()
	_, art, err := pricing.Load("../../datasets/h200/models/steady-gpu.json")
	require.NoError(t, err)
	art.Training.FittedOn = []catalog.FittedOn{{GPU: "H200-SXM", Model: "Llama-3.1-8B", WeightDType: "bf16", KVDType: "bf16"}}
	fpModel := filepath.Join(dir, "steady-gpu.json")
	require.NoError(t, art.Save(fpModel))
	want := "fpm " + fpModel + " was fitted on H200-SXM / Llama-3.1-8B bf16; applied to H100-SXM / Llama-3.1-8B bf16: its error there is unmeasured"

	h100 := filepath.Join(dir, "h100")
	out, stderr, err := runCLILogged(t, "simulate", "--set", "fpm="+fpModel, "--set", "hardware=H100-SXM", "--set", "workload.limit=20", "-o", h100)
	require.NoError(t, err, out)
	require.Contains(t, stderr, "model fitted elsewhere")
	d, err := datasets.Open(h100)
	require.NoError(t, err)
	require.Contains(t, d.Manifest.Notes, want)

	out, err = runCLI(t, "eval", fpModel, h100, "--json")
	require.NoError(t, err, out)
	var rep fit.EvalReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Contains(t, rep.Warnings, want)
}
