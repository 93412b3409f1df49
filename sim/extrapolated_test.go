package sim_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
)

// extrapolating prices as its FPM and says that every step with more
// than four decode requests left its measured range in two operations.
type extrapolating struct{ fpm.FPM }

func (e extrapolating) PredictExtNs(f fpm.Features) (float64, int) {
	if f.DecodeRequests > 4 {
		return e.PredictNs(f), 2
	}
	return e.PredictNs(f), 0
}

// A run counts its FPM's extrapolated lookups on its own executor: the
// result and the manifest's notes carry the count, which is twice the
// steps of more than four decode requests, and a run whose FPM does not
// say counts none.
func TestExtrapolatedOpsCounted(t *testing.T) {
	sc := poissonScenario(3)
	sc.Workload.Requests = 60
	p, err := sc.Plan()
	require.NoError(t, err)
	e := p.Engine()
	plain := *e
	e.FPM = extrapolating{e.FPM}
	dir := filepath.Join(t.TempDir(), "ds")
	res, err := scenario.Run(p, dir, sim.RunOptions{})
	require.NoError(t, err)
	d, err := datasets.Open(dir)
	require.NoError(t, err)
	steps, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
	require.NoError(t, err)
	var want int64
	for _, st := range steps {
		if st.NumDecodeRequests > 4 {
			want += 2
		}
	}
	require.Positive(t, want, "the scenario has steps of more than four decode requests")
	assert.Equal(t, want, res.ExtrapolatedOps)
	assert.Contains(t, d.Manifest.Notes, sim.ExtrapolatedNote(want))

	p.Pools[0].Engine = &plain
	res, err = scenario.Run(p, filepath.Join(t.TempDir(), "plain"), sim.RunOptions{})
	require.NoError(t, err)
	assert.Zero(t, res.ExtrapolatedOps)
	assert.Empty(t, sim.ExtrapolatedNote(0))
}
