package cluster_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim/cluster"
	"github.com/steplab/steplab/sim/workload"
)

// onePerStep prices as its FPM and says every step left its measured
// range in one operation.
type onePerStep struct{ fpm.FPM }

func (e onePerStep) PredictExtNs(f fpm.Features) (float64, int) { return e.PredictNs(f), 1 }

// Three replicas stepping side by side count their FPM's extrapolated
// lookups each on its own executor: the cluster's sum is one per step
// of every engine, the same on one goroutine as on three.
func TestClusterExtrapolatedOps(t *testing.T) {
	sc := scenario.Default()
	sc.Model = "tiny"
	sc.Engine.MaxModelLen = 8192
	require.NoError(t, sc.Set("cluster.pools={a: {replicas: 3}}"))
	p, err := sc.EnginePlan()
	require.NoError(t, err)
	e := p.Pools[0].Engine
	q := p.WithModels(onePerStep{e.FPM}, e.Host)
	arr := arrivals(rand.New(rand.NewPCG(5, 1)), 40, e.Sched.BlockSize, e.Sched.MaxModelLen)
	var got []int64
	for _, jobs := range []int{1, 3} {
		c, err := q.New(&recorder{}, nil)
		require.NoError(t, err)
		c.SetSide(cluster.SideOf(jobs, 0, 0))
		end, err := cluster.Drive(c, workload.NewSlice(arr))
		require.NoError(t, err)
		require.NoError(t, c.Finish(end))
		st := c.Stats()
		require.Positive(t, st.Steps)
		assert.Equal(t, st.Steps, st.ExtrapolatedOps, "jobs %d", jobs)
		got = append(got, st.ExtrapolatedOps)
	}
	assert.Equal(t, got[0], got[1])
}
