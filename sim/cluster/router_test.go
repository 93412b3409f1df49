package cluster_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim/cluster"
	"github.com/steplab/steplab/sim/workload"
)

func routerCluster(t *testing.T, router string, replicas int) (*cluster.Cluster, *recorder) {
	t.Helper()
	sc := scenario.Default()
	sc.Model = "tiny"
	sc.Engine.NumGPUBlocks = 4000
	require.NoError(t, sc.Set(fmt.Sprintf("cluster.pools={w: {replicas: %d}}", replicas)))
	sc.Cluster.Router.Name = router
	p, err := sc.EnginePlan()
	require.NoError(t, err)
	rec := &recorder{}
	c, err := p.New(rec, nil)
	require.NoError(t, err)
	return c, rec
}

func prompt(id string, at int64, blocks int, seed uint64) workload.Arrival {
	h := make([]uint64, blocks)
	for i := range h {
		h[i] = seed*1000 + uint64(i)
	}
	return workload.Arrival{ID: id, AtNs: at, PromptTokens: blocks*16 + 5, OutputTokens: 4, PrefixHashes: h}
}

// The kv router scores each worker with Dynamo's logit from the worker's
// cached prefix, its KV blocks and the prefill tokens routed to it, and
// sends a repeated prompt to the worker that cached it.
func TestKVRouterLogit(t *testing.T) {
	c, rec := routerCluster(t, cluster.RouterKV, 3)
	require.NoError(t, c.Add(prompt("warm", 0, 20, 7)))
	_, err := cluster.Drive(c, workload.NewSlice(nil))
	require.NoError(t, err)
	warm := rec.routes[0].Worker

	// Another prompt's prefill in flight somewhere.
	busy := prompt("busy", 1e9, 30, 9)
	require.NoError(t, c.Add(busy))
	again := prompt("again", 1e9, 20, 7)
	again.PromptTokens += 100
	var want []float64
	overlap, prefilling, kvUsed := c.EntryLoads(again.PrefixHashes)
	for i, o := range overlap {
		isl := float64(again.PromptTokens)
		prefill := (prefilling[i] + isl - o*16) / 16
		decode := kvUsed[i] + math.Ceil(isl/16) - o
		want = append(want, prefill+decode)
	}
	require.NoError(t, c.Add(again))
	r := rec.routes[len(rec.routes)-1]
	assert.Equal(t, want, r.Scores)
	assert.Equal(t, warm, r.Worker, "the worker that cached the prompt")
	assert.EqualValues(t, 20, r.OverlapBlocks)
	assert.EqualValues(t, 20, r.PromptBlocks)
}

// vLLM's DP balancer counts a request it sends as waiting until the next
// stats refresh, so a burst spreads; ties go to the lowest rank.
func TestVLLMDPSpreadsABurst(t *testing.T) {
	c, rec := routerCluster(t, cluster.RouterVLLMDP, 3)
	for i := 0; i < 6; i++ {
		require.NoError(t, c.Add(prompt(fmt.Sprint(i), 0, 2, uint64(i))))
	}
	var got []string
	for _, r := range rec.routes {
		got = append(got, r.Worker)
	}
	assert.Equal(t, []string{"w-0", "w-1", "w-2", "w-0", "w-1", "w-2"}, got)
	assert.Equal(t, []float64{4, 4, 4}, rec.routes[3].Scores, "one waiting request each: 4·1 + 0")
}

// Round robin takes the workers in turn; session keeps a conversation on
// its first worker.
func TestRoundRobinAndSession(t *testing.T) {
	c, rec := routerCluster(t, cluster.RouterRoundRobin, 3)
	for i := 0; i < 4; i++ {
		require.NoError(t, c.Add(prompt(fmt.Sprint(i), 0, 2, 1)))
	}
	assert.Equal(t, "w-0", rec.routes[0].Worker)
	assert.Equal(t, "w-1", rec.routes[1].Worker)
	assert.Equal(t, "w-0", rec.routes[3].Worker)

	c, rec = routerCluster(t, cluster.RouterSession, 3)
	for i := 0; i < 6; i++ {
		conv := uint64(i % 2)
		require.NoError(t, c.Add(prompt(fmt.Sprint(i), int64(i), 70+i, conv)))
	}
	for i := 2; i < 6; i++ {
		assert.Equal(t, rec.routes[i%2].Worker, rec.routes[i].Worker, "turn %d stays with its conversation", i)
	}
	assert.NotEqual(t, rec.routes[0].Worker, rec.routes[1].Worker, "a new conversation goes to the least loaded worker")
}
