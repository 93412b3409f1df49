package scenario_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim/cluster"
)

// A plan's step limit ends the run at exactly that many steps, one engine
// or several side by side, with a StepLimitError; a limit above the run's
// steps changes nothing.
func TestStepLimit(t *testing.T) {
	for _, pools := range []string{"{sim: {replicas: 1}}", "{sim: {replicas: 3}}"} {
		sc := scenario.Default()
		sc.Workload = scenario.WorkloadSpec{Kind: "poisson", RateRPS: 30, Requests: 120,
			Prompt: scenario.LengthSpec{Kind: "fixed", Value: 500}, Output: scenario.LengthSpec{Kind: "fixed", Value: 40}}
		require.NoError(t, sc.Set("cluster.pools="+pools))
		p, err := sc.Plan()
		require.NoError(t, err)
		full, err := scenario.Simulate(p)
		require.NoError(t, err, pools)
		steps := full.Engine.Steps
		require.Greater(t, steps, int64(100), pools)

		p.Plan.MaxSteps = steps / 2
		_, err = scenario.Simulate(p)
		var lim *cluster.StepLimitError
		require.ErrorAs(t, err, &lim, pools)
		require.Equal(t, steps/2, lim.Max)
		require.ErrorContains(t, err, "step limit")

		p.Plan.MaxSteps = steps
		again, err := scenario.Simulate(p)
		require.NoError(t, err, "a limit the run does not pass: %s", pools)
		require.Equal(t, full.Report, again.Report, pools)
	}
}
