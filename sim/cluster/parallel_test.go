package cluster_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/cluster"
)

// partDigests is the SHA-256 of every file of a dataset, by path.
func partDigests(t *testing.T, dir string) map[string]string {
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		s := sha256.Sum256(b)
		out[filepath.ToSlash(rel)] = hex.EncodeToString(s[:])
		return nil
	}))
	return out
}

// Metamorphic: the same plan and seed on one goroutine (one event at a
// time) and on four (engines side by side between routing decisions)
// write the same dataset, part for part, for every router, expert-parallel
// instances, and the placements that fall back to one event at a time.
// Reproduce a failure with -cluster.seed=N.
func TestSideBySideIsSequential(t *testing.T) {
	seed := *propSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (reproduce: go test ./sim/cluster -run TestSideBySideIsSequential -cluster.seed=%d)", seed, seed)
	type tc struct {
		name, sequential string
		sets             []string
	}
	var cases []tc
	for _, r := range cluster.RouterNames {
		cases = append(cases, tc{name: r, sets: []string{"cluster.pools={a: {replicas: 4}}", "cluster.router.name=" + r}})
	}
	cases = append(cases,
		tc{name: "kv at a temperature", sets: []string{"cluster.pools={a: {replicas: 3}}", "cluster.router.name=kv", "cluster.router.temperature=0.5"}},
		tc{name: "expert-parallel", sets: []string{"model=" + tinyMoE, "cluster.pools={e: {replicas: 6, expert_parallel: 2}}", "cluster.router.name=kv"}},
		tc{name: "prefill/decode", sets: []string{"cluster.pools={p: {role: prefill, replicas: 2}, d: {role: decode, replicas: 3}}", "cluster.router.name=kv"}},
		tc{name: "one prefill engine", sets: []string{"cluster.pools={p: {role: prefill, replicas: 1}, d: {role: decode, replicas: 2}}", "cluster.router.name=least_kv"}},
		tc{name: "prefill/decode, expert-parallel", sets: []string{"model=" + tinyMoE,
			"cluster.pools={p: {role: prefill, replicas: 4, expert_parallel: 2}, d: {role: decode, replicas: 2, expert_parallel: 2}}", "cluster.router.name=session"}},
		tc{name: "closed loop", sequential: "workload.kind closed",
			sets: []string{"cluster.pools={a: {replicas: 3}}", "workload.kind=closed", "workload.users=12", "workload.requests=120"}},
		tc{name: "one instance", sequential: "one engine or one expert-parallel instance",
			sets: []string{"model=" + tinyMoE, "cluster.pools={e: {replicas: 2, expert_parallel: 2}}"}},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc := goldenScenario()
			sc.Seed = seed
			sc.Workload.Requests = 150
			for _, s := range c.sets {
				require.NoError(t, sc.Set(s))
			}
			p, err := sc.Plan()
			require.NoError(t, err)
			if c.sequential == "" {
				assert.Empty(t, p.SequentialReason())
			} else {
				assert.Contains(t, p.SequentialReason(), c.sequential)
			}
			var digests []map[string]string
			// One goroutine; four side by side throughout (the merger's
			// recorder on a goroutine of its own); two and four with chunks
			// of a few rows (the units wait for the merger, and a unit
			// waits while another of its goroutine's is stepped); four
			// switching between the two every eight arrivals, windows of
			// six events or more side by side (nearly always); the same at
			// the run's mean events a window, so that it switches back and
			// forth.
			sides := []cluster.Side{cluster.SideOf(1, 0, 0), cluster.SideOf(4, 0, 0), cluster.SideOf(2, 0, 0).Keeping(64),
				cluster.SideOf(4, 0, 0).Keeping(64), cluster.SideOf(4, 6, 8)}
			for i := 0; i < len(sides); i++ {
				sd := sides[i]
				dir := filepath.Join(t.TempDir(), "ds")
				job, done, err := p.Job([]string{"steplab", "simulate"})
				require.NoError(t, err)
				res, err := cluster.RunOn(p.Plan, job, dir, sim.RunOptions{Command: []string{"steplab", "simulate"}}, sd)
				done()
				require.NoError(t, err, "%+v, seed %d", sd, seed)
				if i == 0 { // an engine's loop runs about twice a step
					sides = append(sides, cluster.SideOf(4, int(2*res.Engine.Steps/res.Requests), 8))
				}
				digests = append(digests, partDigests(t, dir))
				m, err := datasets.ReadManifest(dir)
				require.NoError(t, err)
				assert.Equal(t, p.SequentialReason(), m.Cluster.Sequential, "the manifest says why")
			}
			require.NotEmpty(t, digests[0])
			for _, other := range digests[1:] {
				for part, d := range digests[0] {
					assert.Equal(t, d, other[part], "%s differs side by side, seed %d", part, seed)
				}
				assert.Len(t, other, len(digests[0]))
			}
		})
	}
}

// stopAfter is a recorder that closes stop after n steps.
type stopAfter struct {
	recorder
	n    int
	stop chan struct{}
}

func (s *stopAfter) Step(st *datasets.Step, rows []datasets.StepRequest) error {
	if len(s.steps) == s.n {
		close(s.stop)
	}
	return s.recorder.Step(st, rows)
}

// A run stopped side by side first writes what the engines kept: every
// step they ran is recorded, and every request routed once, finished or
// unfinished.
func TestSideBySideStop(t *testing.T) {
	sc := goldenScenario()
	require.NoError(t, sc.Set("cluster.pools={a: {replicas: 4}}"))
	require.NoError(t, sc.Set("cluster.router.name=least_kv"))
	p, err := sc.Plan()
	require.NoError(t, err)
	src, _, done, err := p.Source()
	require.NoError(t, err)
	defer done()
	rec := &stopAfter{n: 3000, stop: make(chan struct{})}
	c, err := p.New(rec, nil)
	require.NoError(t, err)
	c.SetSide(cluster.SideOf(3, 0, 0))
	end, err := cluster.DriveUntil(c, src, rec.stop)
	require.ErrorIs(t, err, sim.ErrInterrupted)
	require.NoError(t, c.Finish(cluster.LastTime(c, end)))
	require.NotEmpty(t, rec.routes)
	seen := map[string]int{}
	unfinished := 0
	for _, r := range rec.reqs {
		seen[r.ReqID]++
		if r.Status == datasets.StatusUnfinished {
			unfinished++
		}
	}
	assert.EqualValues(t, c.Stats().Steps, len(rec.steps), "every step the engines ran is recorded")
	assert.Len(t, rec.reqs, len(rec.routes), "one row per request routed")
	for _, r := range rec.routes {
		assert.Equal(t, 1, seen[r.ReqID], r.ReqID)
	}
	assert.Positive(t, unfinished, "stopped mid-run")
}

// failAfter is a recorder whose Step fails once it holds n steps.
type failAfter struct {
	recorder
	n int
}

func (f *failAfter) Step(st *datasets.Step, rows []datasets.StepRequest) error {
	if len(f.steps) == f.n {
		return errors.New("disk full")
	}
	return f.recorder.Step(st, rows)
}

// A sink's failure side by side ends the run at the same record, with the
// same error, as one event at a time.
func TestSideBySideSinkError(t *testing.T) {
	sc := goldenScenario()
	require.NoError(t, sc.Set("cluster.pools={a: {replicas: 4}}"))
	p, err := sc.Plan()
	require.NoError(t, err)
	var msgs []string
	var digests []uint64
	for _, sd := range []cluster.Side{cluster.SideOf(1, 0, 0), cluster.SideOf(3, 0, 0)} {
		src, _, done, err := p.Source()
		require.NoError(t, err)
		rec := &failAfter{n: 2500}
		c, err := p.New(rec, nil)
		require.NoError(t, err)
		c.SetSide(sd)
		_, err = cluster.DriveUntil(c, src, nil)
		done()
		require.Error(t, err)
		msgs = append(msgs, err.Error())
		digests = append(digests, rec.digest())
	}
	assert.Contains(t, msgs[0], "disk full")
	assert.Equal(t, msgs[0], msgs[1])
	assert.Equal(t, digests[0], digests[1])
}

// Across part boundaries: a run long enough that step_requests fills
// several parts, at a load where most steps decode one request (a step's
// rows often end a part exactly), writes on four goroutines with the
// pipelined writer the files one goroutine writes with the sequential one.
func TestSideBySideAcrossParts(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)
	sc := goldenScenario()
	sc.Workload.Requests, sc.Workload.RateRPS = 1500, 4
	require.NoError(t, sc.Set("cluster.pools={a: {replicas: 4}}"))
	p, err := sc.Plan()
	require.NoError(t, err)
	var digests []map[string]string
	for _, n := range []int{1, 4} {
		runtime.GOMAXPROCS(n)
		dir := filepath.Join(t.TempDir(), "ds")
		job, done, err := p.Job(nil)
		require.NoError(t, err)
		_, err = cluster.RunOn(p.Plan, job, dir, sim.RunOptions{}, cluster.SideOf(n, 0, 0))
		done()
		require.NoError(t, err)
		digests = append(digests, partDigests(t, dir))
	}
	require.Greater(t, len(digests[0]), 10, "the run spans parts")
	assert.Equal(t, digests[0], digests[1])
}
