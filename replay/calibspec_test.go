package replay

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/pricing"
)

// calibrate's set-up rebuilds each run on the catalogue (one engine here)
// and picks the start: the run's prior, else --start, a linear, roofline or
// ops artifact (a grid is refused); the host model
// is --host-model (a host model file, or an artifact's params.host: what
// pricing.LoadHostModel reads), else the start's params.host, else the prior.
func TestCalibSpecSetup(t *testing.T) {
	dir, _ := simulated(t, "async")
	const hostFile = "../datasets/h200/models/host.json"
	fromFile, err := pricing.LoadHostModel(hostFile)
	require.NoError(t, err)

	lin, err := fpm.NewLinear([]string{fpm.TermConst, fpm.TermDecodeRequests}, []float64{5e6, 3e4})
	require.NoError(t, err)
	own := fpm.DefaultHostModel()
	own.ScheduleFixedNs *= 3
	a := fpm.LinearArtifact(lin)
	require.NoError(t, pricing.WithHost(a, own))
	start := filepath.Join(t.TempDir(), "start.json")
	require.NoError(t, a.Save(start))

	for _, c := range []struct {
		name      string
		spec      CalibSpec
		host      fpm.HostModel
		linearNow bool // the start is the given artifact, not the run's prior
	}{
		{"prior", CalibSpec{}, fpm.DefaultHostModel(), false},
		{"host model file", CalibSpec{HostModel: hostFile}, fromFile, false},
		{"start's params.host", CalibSpec{Start: start}, own, true},
		{"host model from an artifact", CalibSpec{HostModel: start}, own, false},
		{"host model file over the start's", CalibSpec{Start: start, HostModel: hostFile}, fromFile, true},
	} {
		c.spec.Datasets = []string{dir}
		run, err := c.spec.Setup()
		require.NoError(t, err, c.name)
		assert.Equal(t, c.host, run.Opts.Host, c.name)
		if c.linearNow {
			assert.Equal(t, lin.Coef, run.Opts.Start.ScaleValues(), c.name)
		} else {
			// The run's GPU (an H200) has a kernel database: the prior is
			// the measured-operations one, its terms at 1.
			assert.Equal(t, "ops(h200-sxm-vllm-0.24.0, Llama-3.1-8B)", run.Opts.StartName, c.name)
			assert.Equal(t, []string{fpm.PriorTermGEMM, fpm.PriorTermPrefillAttn, fpm.PriorTermDecodeAttn}, run.Opts.Start.ScaleTerms(), c.name)
			assert.Equal(t, []float64{1, 1, 1}, run.Opts.Start.ScaleValues(), c.name)
		}
		assert.Equal(t, "H200-SXM", run.Sets[0].Plan.Pools[0].Engine.HW.Name, "%s: the catalogue's GPU", c.name)
		require.Len(t, run.FittedOn, 1, "%s: the artifact records what it was calibrated on", c.name)
		assert.Equal(t, "H200-SXM", run.FittedOn[0].GPU, c.name)
	}
	// An ops artifact (an engine fitted on a grid) starts a calibration
	// too: its engine's scales are the terms' starting values.
	run, err := CalibSpec{Datasets: []string{dir}, Start: "../datasets/h200/models/ops-worker.json"}.Setup()
	require.NoError(t, err)
	assert.InDelta(t, 1.037, run.Opts.Start.ScaleValues()[0], 1e-3, "ops-worker.json's gemm_scale")
	grid := filepath.Join(t.TempDir(), "grid.json")
	require.NoError(t, fpm.GridArtifact(&fpm.Grid{Prefill: &fpm.PrefillGrid{Tokens: []float64{128, 512}, Ns: []float64{6e6, 9e6}}}).Save(grid))
	_, err = CalibSpec{Datasets: []string{dir}, Start: grid}.Setup()
	require.ErrorContains(t, err, "calibrate: --start must be a linear, roofline or ops artifact (steplab fit --form linear, steplab calibrate): "+grid+" is form grid")
	_, err = CalibSpec{Datasets: []string{dir}, Holdout: 0.3, HoldoutDatasets: []string{dir}}.Setup()
	require.ErrorContains(t, err, "use --holdout or --holdout-dataset, not both")
}
