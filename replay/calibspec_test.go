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
// and picks the start: --start must be a linear artifact; the host model
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
		linearNow bool // the start is the given artifact, not the roofline's linearisation
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
			assert.Equal(t, lin.Coef, run.Opts.Start.Coef, c.name)
		} else {
			assert.Contains(t, run.Opts.Start.Terms, fpm.TermPrefillAttn, "%s: the roofline linearised", c.name)
		}
		assert.Equal(t, "H200-SXM", run.Sets[0].Plan.Pools[0].Engine.HW.Name, "%s: the catalogue's GPU", c.name)
		require.Len(t, run.FittedOn, 1, "%s: the artifact records what it was calibrated on", c.name)
		assert.Equal(t, "H200-SXM", run.FittedOn[0].GPU, c.name)
	}
	_, err = CalibSpec{Datasets: []string{dir}, Start: "../datasets/h200/models/ops-worker.json"}.Setup()
	require.ErrorContains(t, err, "calibrate: --start must be a linear artifact (steplab fit --form linear): ../datasets/h200/models/ops-worker.json is form ops")
	_, err = CalibSpec{Datasets: []string{dir}, Holdout: 0.3, HoldoutDatasets: []string{dir}}.Setup()
	require.ErrorContains(t, err, "use --holdout or --holdout-dataset, not both")
}
