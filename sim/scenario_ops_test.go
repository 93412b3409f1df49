package sim_test

import (
	"path/filepath"
	"testing"

	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/scenario"
	"github.com/stretchr/testify/require"
)

// fpm: names the measured-operations prior by spec (for the scenario's
// shape and hardware) or by an ops artifact; a simulation with it is
// deterministic like any other.
func TestScenarioOpsPrior(t *testing.T) {
	sc := poissonScenario(3)
	sc.Workload.Requests = 60
	sc.FPM = "ops"
	p, err := sc.Plan()
	require.NoError(t, err)
	o, ok := p.Engine().FPM.(*fpm.Ops)
	require.True(t, ok, "%T", p.Engine().FPM)
	require.Equal(t, "h200-sxm-vllm-0.24.0", o.Database())
	require.Equal(t, "ops", p.Engine().FPMName)
	a, _ := simulateSHA(t, sc)
	b, _ := simulateSHA(t, sc)
	require.Equal(t, a, b)

	sc.Model = "Llama-3.1-70B-TP4"
	_, err = sc.Plan()
	require.NoError(t, err, "TP=4 prices its all-reduces from the comm table")

	sc = scenario.Default()
	sc.FPM = filepath.Join("..", "datasets", "h200", "models", "ops-worker.json")
	p, err = sc.Plan()
	require.NoError(t, err)
	require.Equal(t, "steplab-worker", p.Engine().FPM.(*fpm.Ops).Engine().Name)

	for fpModel, want := range map[string]string{"ops:nope": `"nope" is neither`, "ops": "no vllm database shipped with steplab was measured on RTX-4090"} {
		sc := scenario.Default()
		sc.FPM, sc.Hardware = fpModel, "H200"
		if fpModel == "ops" {
			sc.Hardware = "RTX-4090"
		}
		_, err := sc.Plan()
		require.ErrorContains(t, err, "fpm: ")
		require.ErrorContains(t, err, want)
	}
}
