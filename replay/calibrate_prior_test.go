package replay

import (
	"math"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/importers"
	"github.com/steplab/steplab/pricing"
	"github.com/steplab/steplab/scenario"
)

// The bundled vLLM runs calibrate validates on (docs/replay.md): Llama and
// Qwen3-30B-A3B (DP 2 × EP 2) on the RTX PRO 6000, whose kernel database
// is shipped, and Llama on an RTX 4090, which has none.
var bundledRuns = []struct {
	name, source, prior string
}{
	{"llama-rtxpro6000", "embedded:llmservingsim-llama-3.1-8b", "ops(rtx-pro-6000-server-vllm-0.19.0, Llama-3.1-8B)"},
	{"qwen3-30b-a3b-rtxpro6000", "embedded:llmservingsim-qwen3-30b-a3b", "ops(rtx-pro-6000-server-vllm-0.19.0, Qwen3-30B-A3B)"},
	{"llama-rtx4090", filepath.Join("..", "datasets", "importers", "testdata", "llmservingsim-rtx4090-llama-3.1-8b"), "roofline(RTX-4090, Llama-3.1-8B)"},
}

var bundledOnce sync.Map

// bundled imports a bundled run once per test binary.
func bundled(t *testing.T, name, source string) string {
	t.Helper()
	dir := filepath.Join(sharedTmp(t), "bundled-"+name)
	once, _ := bundledOnce.LoadOrStore(name, &sync.Once{})
	var err error
	once.(*sync.Once).Do(func() { _, err = importers.Import("vllm-requests", source, dir, importers.Options{}) })
	require.NoError(t, err)
	return dir
}

// calibrate's start is the run's prior: the start row's errors are those
// of replay requests prior DATASET on the same run, exactly (the ops
// prior on the RTX PRO 6000, whose database is shipped; the roofline on
// the RTX 4090).
func TestCalibrateStartIsThePrior(t *testing.T) {
	for _, r := range bundledRuns {
		t.Run(r.name, func(t *testing.T) {
			dir := bundled(t, r.name, r.source)
			d, err := datasets.Open(dir)
			require.NoError(t, err)
			p, _, err := scenario.PlanFromManifest(d.Manifest, scenario.ManifestOptions{FPM: pricing.FPMPrior})
			require.NoError(t, err)
			sum, err := RunRequests(d, RequestOptions{Plan: p.Plan}, Output{Dir: filepath.Join(t.TempDir(), "rr"), NoFigures: true})
			require.NoError(t, err)

			run, err := CalibSpec{Datasets: []string{dir}, MaxEvals: 1}.Setup()
			require.NoError(t, err)
			assert.Equal(t, r.prior, run.Opts.StartName)
			res, err := Calibrate(run.Sets, run.Opts)
			require.NoError(t, err)
			require.Len(t, res.Before, 1)
			rec, pred := metricsOf(sum)
			for _, k := range calibMetrics {
				assert.Equal(t, (pred[k]-rec[k])/rec[k], res.Before[0].RelErr[k], "%s: start row against replay requests prior", k)
			}
			assert.Equal(t, StatusEvalLimit, res.Status)
			assert.Contains(t, res.Reason, "raise --max-evals")
		})
	}
}

// Calibrated from the prior on the first half of each bundled run's
// requests, the held-out half comes within the targets (mean E2E 3%, TTFT
// 5%, ITL 3%), and the search converges within its default budget.
func TestCalibrateBundledRunsHoldout(t *testing.T) {
	for _, r := range bundledRuns {
		t.Run(r.name, func(t *testing.T) {
			dir := bundled(t, r.name, r.source)
			run, err := CalibSpec{Datasets: []string{dir}, Holdout: 0.3}.Setup()
			require.NoError(t, err)
			res, err := Calibrate(run.Sets, run.Opts)
			require.NoError(t, err)
			assert.Equal(t, StatusConverged, res.Status, res.Reason)
			require.Len(t, res.Holdout, 1)
			h := res.Holdout[0]
			for m, target := range map[string]float64{"e2e_mean": 0.03, "ttft_mean": 0.05, "itl_mean": 0.03} {
				assert.Less(t, math.Abs(h.RelErr[m]), target, "held-out %s %+.1f%%", m, 100*h.RelErr[m])
			}
			a, err := res.Artifact(nil, nil, "test")
			require.NoError(t, err)
			assert.Equal(t, run.Sets[0].Plan.Pools[0].Engine.FPMName != pricing.FPMRoofline, a.Form == "ops", "the artifact keeps the prior's form")
		})
	}
}
