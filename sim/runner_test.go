package sim_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/validate"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
)

// A run stopped midway (a signal in the CLI) ends with ErrInterrupted and
// leaves a valid partial dataset: every table closed, no temporary file,
// every request it started recorded.
func TestRunInterruptedLeavesPartialDataset(t *testing.T) {
	sc := scenario.Default()
	sc.Workload.Limit = 3000
	p, err := sc.Plan()
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "ds")
	stop := make(chan struct{})
	_, err = scenario.Run(p, dir, sim.RunOptions{Stop: stop, Progress: func(done int64) {
		select {
		case <-stop:
		default:
			close(stop)
		}
	}})
	require.ErrorIs(t, err, sim.ErrInterrupted)

	rep, err := validate.Dataset(dir, validate.Options{})
	require.NoError(t, err)
	assert.True(t, rep.Partial)
	assert.Zero(t, rep.Errors, "%v", rep.Violations)
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	reqs, err := datasets.ReadAll[datasets.Request](d, datasets.TableRequests)
	require.NoError(t, err)
	assert.Greater(t, len(reqs), 512, "the requests finished before the stop are kept")
	assert.Less(t, len(reqs), 3000, "the run stopped early")
	require.NoError(t, filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		assert.False(t, strings.Contains(filepath.Base(path), ".tmp"), "temporary file left: %s", path)
		return err
	}))
}
