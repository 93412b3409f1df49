package cluster_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/validate"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/cluster"
)

// A cluster run stopped midway (a signal in the CLI) ends with
// sim.ErrInterrupted and leaves a valid partial dataset: every table
// closed, no temporary file, every request it started recorded.
func TestRunInterruptedLeavesPartialDataset(t *testing.T) {
	for _, pools := range []string{"{a: {replicas: 4}}", "{p: {role: prefill, replicas: 1}, d: {role: decode, replicas: 2}}"} {
		sc := scenario.Default()
		sc.Workload.Limit = 3000
		require.NoError(t, sc.Set("cluster.pools="+pools))
		require.NoError(t, sc.Set("cluster.router.name=kv"))
		p, err := sc.Plan()
		require.NoError(t, err)
		dir := filepath.Join(t.TempDir(), "ds")
		stop := make(chan struct{})
		_, err = scenario.Run(p, dir, sim.RunOptions{Stop: stop, Progress: func(int64) {
			select {
			case <-stop:
			default:
				close(stop)
			}
		}})
		require.ErrorIs(t, err, sim.ErrInterrupted, pools)

		rep, err := validate.Dataset(dir, validate.Options{})
		require.NoError(t, err)
		assert.True(t, rep.Partial, pools)
		assert.Zero(t, rep.Errors, "%s: %v", pools, rep.Violations)
		d, err := datasets.Open(dir)
		require.NoError(t, err)
		reqs, err := datasets.ReadAll[datasets.Request](d, datasets.TableRequests)
		require.NoError(t, err)
		assert.Greater(t, len(reqs), 512, "%s: the requests finished before the stop are kept", pools)
		assert.Less(t, len(reqs), 3000, "%s: the run stopped early", pools)
		require.NoError(t, filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
			assert.False(t, strings.Contains(filepath.Base(path), ".tmp"), "temporary file left: %s", path)
			return err
		}))
	}
}

// A cluster's latencies at the two edges of its FPM's prediction interval
// bracket the point simulation, with expert-parallel instances too; an
// FPM without intervals is refused with the pool it prices.
func TestBounds(t *testing.T) {
	lin, err := fpm.NewLinear([]string{fpm.TermConst, fpm.TermPrefillTokens, fpm.TermDecodeRequests, fpm.TermDecodeKVTokens},
		[]float64{5e6, 2e4, 3e4, 40})
	require.NoError(t, err)
	lin.Residuals = &fpm.ResidualQuantiles{Scale: fpm.ScaleRelative, P: []float64{0.05, 0.5, 0.95}, Values: []float64{-0.1, 0, 0.2}}
	for _, sets := range [][]string{
		{"cluster.pools={a: {replicas: 3}}"},
		{"model=" + tinyMoE, "cluster.pools={e: {replicas: 4, expert_parallel: 2}}"},
	} {
		sc := scenario.Default()
		sc.Workload = scenario.WorkloadSpec{Kind: "poisson", RateRPS: 30, Requests: 300,
			Prompt: scenario.LengthSpec{Kind: "fixed", Value: 800}, Output: scenario.LengthSpec{Kind: "fixed", Value: 60}}
		sc.Engine.NumGPUBlocks = 20000 // the tiny model's GPU would hold millions
		for _, s := range sets {
			require.NoError(t, sc.Set(s))
		}
		p, err := sc.Plan()
		require.NoError(t, err)
		_, err = scenario.Bounds(p, 0.9)
		require.ErrorContains(t, err, "fpm roofline has no prediction intervals", sets)
		p.Plan = p.WithModels(lin, p.Pools[0].Engine.Host)
		assert.Equal(t, 0.9, p.IntervalLevel(0))
		point, err := scenario.Simulate(p)
		require.NoError(t, err)
		iv, err := scenario.Bounds(p, 0.9)
		require.NoError(t, err)
		assert.Equal(t, sim.BoundsMethod, iv.Method)
		assert.Less(t, iv.E2E.Lo.P50, point.E2E.P50, sets)
		assert.Greater(t, iv.E2E.Hi.P50, point.E2E.P50, sets)
		assert.Less(t, iv.ITL.Lo.Mean, iv.ITL.Hi.Mean, sets)
	}
}

// A backend runs the one engine of a plan through the same drive loop:
// its executor and clock run the steps, its worker id names them, its
// hooks amend the manifest and bracket the run. With the plan's own
// simulated executor on it, the rows are Run's but for that name.
func TestExecuteOnABackend(t *testing.T) {
	p, err := goldenScenario().Plan()
	require.NoError(t, err)
	read := func(dir string) ([]datasets.Step, []datasets.Request) {
		d, err := datasets.Open(dir)
		require.NoError(t, err)
		steps, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
		require.NoError(t, err)
		reqs, err := datasets.ReadAll[datasets.Request](d, datasets.TableRequests)
		require.NoError(t, err)
		return steps, reqs
	}
	want := filepath.Join(t.TempDir(), "run")
	_, err = scenario.Run(p, want, sim.RunOptions{})
	require.NoError(t, err)

	e := p.Engine()
	var started, stopped int
	b := sim.Backend{Exec: sim.NewSimExecutor(e.FPM, e.Payload, e.Host, e.Graphs), Clock: &sim.VirtualClock{}, Host: &sim.HostAdapter{M: e.Host},
		WorkerID: "gpu-0", CheckpointSteps: 64,
		Manifest: func(m *datasets.Manifest) { m.Notes = append(m.Notes, "on a backend") },
		Started:  func(*datasets.Writer) error { started++; return nil },
		Stopping: func() error { stopped++; return nil }}
	got := filepath.Join(t.TempDir(), "backend")
	job, cleanup, err := p.Job(nil)
	require.NoError(t, err)
	defer cleanup()
	_, err = cluster.Execute(p.Plan, job, got, b, sim.RunOptions{})
	require.NoError(t, err)
	assert.Equal(t, [2]int{1, 1}, [2]int{started, stopped}, "the hooks bracket the run once")
	m, err := datasets.ReadManifest(got)
	require.NoError(t, err)
	assert.Contains(t, m.Notes, "on a backend")

	wantSteps, wantReqs := read(want)
	steps, reqs := read(got)
	require.NotEmpty(t, steps)
	for i := range steps {
		require.Equal(t, "gpu-0", steps[i].WorkerID)
		steps[i].WorkerID = wantSteps[i].WorkerID
	}
	assert.Equal(t, wantSteps, steps)
	assert.Equal(t, wantReqs, reqs)
}

// What only one engine runs, a benchmark grid and a backend's worker, is
// refused for a cluster of more before any dataset is created.
func TestRunRefusesWhatOneEngineRuns(t *testing.T) {
	sc := goldenScenario()
	require.NoError(t, sc.Set("cluster.pools={sim: {replicas: 2}}"))
	p, err := sc.Plan()
	require.NoError(t, err)
	e := p.Engine()
	worker := sim.Backend{Exec: sim.NewSimExecutor(e.FPM, e.Payload, e.Host, e.Graphs), Clock: &sim.VirtualClock{}}
	src, _, cleanup, err := p.Source()
	require.NoError(t, err)
	defer cleanup()
	for _, tc := range []struct {
		name string
		run  func(dir string) error
		want string
	}{
		{"benchmark", func(dir string) error { _, err := cluster.Run(p.Plan, sim.Job{}, dir, sim.RunOptions{}); return err },
			"workload.kind benchmark runs one engine: remove the cluster block"},
		{"backend", func(dir string) error {
			_, err := cluster.Execute(p.Plan, sim.Job{Source: src}, dir, worker, sim.RunOptions{})
			return err
		}, "a backend runs the steps of one engine: remove the cluster block"},
		{"benchmark simulated", func(string) error { _, err := cluster.Simulate(p.Plan, sim.Job{}); return err },
			"workload.kind benchmark writes a dataset: use steplab simulate"},
	} {
		dir := filepath.Join(t.TempDir(), "ds")
		require.ErrorContains(t, tc.run(dir), tc.want, tc.name)
		_, err := os.Stat(dir)
		assert.True(t, os.IsNotExist(err), "%s: no dataset", tc.name)
	}
}
