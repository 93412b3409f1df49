package cluster_test

import (
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/cluster"
	"github.com/steplab/steplab/sim/workload"
)

var (
	propSeed  = flag.Uint64("cluster.seed", 0, "run TestClusterProperties for this one seed (0: seeds from the clock)")
	propCount = flag.Int("cluster.seeds", 30, "number of seeds of TestClusterProperties")
)

// recorder keeps everything a cluster records.
type recorder struct {
	waves    []wave
	steps    []datasets.Step
	stepReqs [][]datasets.StepRequest
	reqs     []datasets.Request
	routes   []cluster.Route
	xfers    []cluster.Transfer
}

func (r *recorder) Step(s *datasets.Step, rows []datasets.StepRequest) error {
	r.steps = append(r.steps, *s)
	r.stepReqs = append(r.stepReqs, append([]datasets.StepRequest(nil), rows...))
	return nil
}
func (r *recorder) Request(q *datasets.Request) error { r.reqs = append(r.reqs, *q); return nil }
func (r *recorder) Route(x *cluster.Route) error {
	c := *x
	c.Scores = append([]float64(nil), x.Scores...)
	r.routes = append(r.routes, c)
	return nil
}
func (r *recorder) Transfer(x *cluster.Transfer) error { r.xfers = append(r.xfers, *x); return nil }

type wave struct {
	group      int32
	start, end int64
	steps      []int64
}

// digest summarises every record, to compare two runs.
func (r *recorder) digest() uint64 {
	h := fnv.New64a()
	for _, s := range r.steps {
		fmt.Fprintf(h, "%d %s %d %d %d|", s.StepID, s.WorkerID, s.TScheduleStart, s.TOutput, s.GPUTimeNs)
	}
	for _, q := range r.reqs {
		fmt.Fprintf(h, "%s %d %d %s|", q.ReqID, q.FirstTokenNs, q.FinishNs, q.Status)
	}
	for _, x := range r.routes {
		fmt.Fprintf(h, "%s %s %v|", x.ReqID, x.Worker, x.Scores)
	}
	for _, x := range r.xfers {
		fmt.Fprintf(h, "%s %s %d|", x.ReqID, x.To, x.EndNs)
	}
	return h.Sum64()
}

// arrivals draws a workload with shared prefixes: conversations whose
// turns extend the previous turn's prompt, and a shared system prompt. A
// conversation whose next turn would not fit maxModelLen (with its
// output) ends, and a new one starts: every request fits the engine.
func arrivals(r *rand.Rand, n, blockSize, maxModelLen int) []workload.Arrival {
	type conv struct {
		hashes []uint64
		tokens int
	}
	var convs []*conv
	sys := []uint64{1, 2}
	var out []workload.Arrival
	t := int64(0)
	for i := 0; i < n; i++ {
		t += int64(r.ExpFloat64() * 40e6)
		var c *conv
		if len(convs) > 0 && r.IntN(3) > 0 {
			c = convs[r.IntN(len(convs))]
		} else {
			c = &conv{hashes: append([]uint64(nil), sys...), tokens: len(sys) * blockSize}
			convs = append(convs, c)
		}
		add := 16 + r.IntN(600)
		if c.tokens+add+120 > maxModelLen {
			c = &conv{hashes: append([]uint64(nil), sys...), tokens: len(sys) * blockSize}
			convs = append(convs, c)
		}
		c.tokens += add
		for len(c.hashes) < c.tokens/blockSize {
			c.hashes = append(c.hashes, r.Uint64())
		}
		out = append(out, workload.Arrival{ID: fmt.Sprintf("r%d", i), AtNs: t, PromptTokens: c.tokens,
			OutputTokens: 1 + r.IntN(120), PrefixHashes: append([]uint64(nil), c.hashes...)})
	}
	return out
}

// randomPlan draws a placement: aggregated or disaggregated pools,
// expert-parallel instances, any router, async or not, a small KV cache.
func randomPlan(r *rand.Rand) (*cluster.Plan, string) {
	sc := scenario.Default()
	sc.Seed = r.Uint64()
	sc.Model = "tiny"
	sc.Engine.AsyncScheduling = r.IntN(2) == 0
	sc.Engine.MaxNumSeqs = 4 << r.IntN(3)
	sc.Engine.MaxNumBatchedTokens = 512 << r.IntN(2)
	sc.Engine.MaxModelLen = 8192
	sc.Engine.NumGPUBlocks = 600 + r.IntN(2000)
	sc.Cluster.Router.Name = cluster.RouterNames[r.IntN(len(cluster.RouterNames))]
	if r.IntN(2) == 0 {
		t := r.Float64()
		sc.Cluster.Router.Temperature = t
	}
	var pools []string
	switch r.IntN(3) {
	case 0:
		pools = []string{fmt.Sprintf("a: {replicas: %d}", 1+r.IntN(5))}
	case 1:
		pools = []string{fmt.Sprintf("p: {role: prefill, replicas: %d}", 1+r.IntN(3)),
			fmt.Sprintf("d: {role: decode, replicas: %d}", 1+r.IntN(3))}
		bw, lat := 1+50*r.Float64(), 20*r.Float64()
		sc.Cluster.Links.KVTransfer = cluster.LinkSpec{BandwidthGBs: &bw, LatencyUs: &lat}
	default:
		ep := 1 + r.IntN(4) // 1: every engine holds all experts
		pools = []string{fmt.Sprintf("e: {replicas: %d, expert_parallel: %d}", ep*(1+r.IntN(2)), ep)}
		sc.Model = tinyMoE
		bw, lat := 5+50*r.Float64(), 5.0
		sc.Cluster.Links.Expert = cluster.LinkSpec{BandwidthGBs: &bw, LatencyUs: &lat}
	}
	if err := sc.Set("cluster.pools={" + strings.Join(pools, ", ") + "}"); err != nil {
		panic(err)
	}
	p, err := sc.EnginePlan()
	if err != nil {
		panic(err)
	}
	return p.Plan, fmt.Sprintf("%v router %s async %v", pools, sc.Cluster.Router.Name, sc.Engine.AsyncScheduling)
}

// runRandom runs a random placement on jobs goroutines (the waves are
// recorded on one).
func runRandom(seed uint64, jobs int) (*recorder, *cluster.Plan, []workload.Arrival, string, error) {
	r := rand.New(rand.NewPCG(seed, 1))
	p, desc := randomPlan(r)
	e := p.Pools[0].Engine.Sched
	arr := arrivals(r, 40+r.IntN(120), e.BlockSize, e.MaxModelLen)
	rec := &recorder{}
	c, err := p.New(rec, nil)
	if err != nil {
		return nil, p, arr, desc, err
	}
	if jobs <= 1 {
		c.SetWaveHook(func(g int32, start, end int64, steps []int64) {
			rec.waves = append(rec.waves, wave{g, start, end, append([]int64(nil), steps...)})
		})
	}
	c.SetSide(cluster.SideOf(jobs, 0, 0))
	end, err := cluster.Drive(c, workload.NewSlice(arr))
	if err == nil {
		err = c.Finish(end)
	}
	return rec, p, arr, desc, err
}

// Over random placements and workloads, a cluster loses no request,
// routes every request once per pool it enters, admits a disaggregated
// request to its decode engine only after its KV transfer ends, steps the
// ranks of an expert-parallel instance together, and replays identically,
// on one goroutine or side by side on three.
// Reproduce a failure with -cluster.seed=N.
func TestClusterProperties(t *testing.T) {
	seeds := make([]uint64, 0, *propCount)
	if *propSeed != 0 {
		seeds = append(seeds, *propSeed)
	} else {
		base := uint64(time.Now().UnixNano())
		for i := 0; i < *propCount; i++ {
			seeds = append(seeds, base+uint64(i))
		}
	}
	for _, seed := range seeds {
		rec, p, arr, desc, err := runRandom(seed, 1)
		fail := func(format string, a ...any) {
			t.Fatalf("seed %d (%s): %s\nreproduce: go test ./sim/cluster -run TestClusterProperties -cluster.seed=%d",
				seed, desc, fmt.Sprintf(format, a...), seed)
		}
		if err != nil {
			fail("run: %v", err)
		}
		checkRequests(rec, arr, fail)
		checkRoutes(rec, p, arr, fail)
		checkTransfers(rec, p, fail)
		checkLockstep(rec, p, fail)
		again, _, _, _, _ := runRandom(seed, 1)
		if again.digest() != rec.digest() {
			fail("a second run with the same seed recorded something else")
		}
		side, _, _, _, err := runRandom(seed, 3)
		if err != nil || side.digest() != rec.digest() {
			fail("on three goroutines the run recorded something else (err %v)", err)
		}
	}
}

func checkRequests(rec *recorder, arr []workload.Arrival, fail func(string, ...any)) {
	rows := map[string]datasets.Request{}
	for _, q := range rec.reqs {
		if _, dup := rows[q.ReqID]; dup {
			fail("request %s has two rows", q.ReqID)
		}
		rows[q.ReqID] = q
	}
	for _, a := range arr {
		q, ok := rows[a.ID]
		switch {
		case !ok:
			fail("request %s was lost: no row", a.ID)
		case q.Status != datasets.StatusFinished:
			fail("request %s ended %s", a.ID, q.Status)
		case q.ArrivalNs != a.AtNs || q.OutputTokens != int64(a.OutputTokens) || q.PromptTokens != int64(a.PromptTokens):
			fail("request %s row %+v does not match its arrival", a.ID, q)
		case !(q.ArrivalNs <= q.FirstScheduledNs && q.FirstScheduledNs <= q.FirstTokenNs && q.FirstTokenNs <= q.FinishNs):
			fail("request %s times out of order: %+v", a.ID, q)
		}
	}
	if len(rows) != len(arr) {
		fail("%d request rows for %d arrivals", len(rows), len(arr))
	}
	ids := map[int64]bool{}
	last := map[string]int64{}
	for i, s := range rec.steps {
		if ids[s.StepID] {
			fail("step id %d used twice", s.StepID)
		}
		ids[s.StepID] = true
		if prev, ok := last[s.WorkerID]; ok && s.StepID <= prev {
			fail("worker %s: step %d after %d", s.WorkerID, s.StepID, prev)
		}
		last[s.WorkerID] = s.StepID
		for _, row := range rec.stepReqs[i] {
			if row.StepID != s.StepID {
				fail("step_requests row of step %d carries step %d", s.StepID, row.StepID)
			}
		}
	}
}

func checkRoutes(rec *recorder, p *cluster.Plan, arr []workload.Arrival, fail func(string, ...any)) {
	per := map[string]map[string]int{}
	for _, x := range rec.routes {
		if per[x.Pool] == nil {
			per[x.Pool] = map[string]int{}
		}
		per[x.Pool][x.ReqID]++
		if int(x.Candidates) != len(x.Scores) || x.Score != x.Scores[indexOf(x.Worker)] {
			fail("route of %s: %d candidates, scores %v, chosen %s score %g", x.ReqID, x.Candidates, x.Scores, x.Worker, x.Score)
		}
	}
	for _, pp := range p.Pools {
		if pp.Replicas == 1 {
			continue
		}
		for _, a := range arr {
			if n := per[pp.Name][a.ID]; n != 1 {
				fail("request %s routed %d times in pool %s", a.ID, n, pp.Name)
			}
		}
	}
}

// indexOf is the index of a worker in its pool ("pool-3" → 3).
func indexOf(worker string) int {
	var i int
	fmt.Sscanf(worker[strings.LastIndexByte(worker, '-')+1:], "%d", &i)
	return i
}

func checkTransfers(rec *recorder, p *cluster.Plan, fail func(string, ...any)) {
	if !p.Disaggregated() {
		if len(rec.xfers) > 0 {
			fail("transfers in an aggregated cluster")
		}
		return
	}
	end := map[string]cluster.Transfer{}
	for _, x := range rec.xfers {
		if _, dup := end[x.ReqID]; dup {
			fail("request %s transferred twice", x.ReqID)
		}
		if x.EndNs < x.StartNs || x.Bytes <= 0 {
			fail("transfer %+v", x)
		}
		end[x.ReqID] = x
	}
	for i, s := range rec.steps {
		for _, row := range rec.stepReqs[i] {
			x, ok := end[row.ReqID]
			switch {
			case !ok:
				fail("request %s stepped without a transfer", row.ReqID)
			case s.WorkerID == x.To && s.TScheduleStart < x.EndNs:
				fail("request %s scheduled on decode engine %s at %d before its transfer ended at %d", row.ReqID, x.To, s.TScheduleStart, x.EndNs)
			case s.WorkerID == x.From && s.TOutput > x.StartNs:
				fail("request %s stepped on prefill engine %s until %d after its transfer started at %d", row.ReqID, x.From, s.TOutput, x.StartNs)
			}
		}
	}
}

// checkLockstep: the ranks of an expert-parallel instance run their
// passes together: an instance's waves never overlap, each holds one step
// (or a dummy) of every rank, and every step of a rank is in one wave, in
// the rank's order.
func checkLockstep(rec *recorder, p *cluster.Plan, fail func(string, ...any)) {
	ep := p.Pools[0].ExpertParallel
	if !p.ExpertParallel() {
		if len(rec.waves) > 0 {
			fail("waves without experts")
		}
		return
	}
	end := map[int32]int64{}
	inWaves := map[string][]int64{}
	for _, w := range rec.waves {
		if w.start < end[w.group] {
			fail("instance %d: a wave starts at %d before the previous one ends at %d", w.group, w.start, end[w.group])
		}
		end[w.group] = w.end
		if len(w.steps) != max(1, ep) {
			fail("instance %d: a wave of %d ranks, want %d", w.group, len(w.steps), ep)
		}
		real := 0
		for r, id := range w.steps {
			if id >= 0 {
				real++
				name := fmt.Sprintf("%s-%d", p.Pools[0].Name, int(w.group)*max(1, ep)+r)
				inWaves[name] = append(inWaves[name], id)
			}
		}
		if real == 0 {
			fail("instance %d: a wave of dummies only", w.group)
		}
	}
	perWorker := map[string]int{}
	for _, s := range rec.steps {
		perWorker[s.WorkerID]++
	}
	for w, n := range perWorker {
		ids := inWaves[w]
		if len(ids) != n {
			fail("worker %s: %d steps recorded, %d in waves", w, n, len(ids))
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				fail("worker %s: step %d joined a wave after step %d", w, ids[i], ids[i-1])
			}
		}
	}
}

// sim.Sink is what the engines of a cluster record into.
var _ sim.Sink = (*recorder)(nil)
