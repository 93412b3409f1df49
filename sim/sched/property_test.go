package sched

import (
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"testing"
)

var (
	flagSeeds = flag.Int("sched.seeds", 200, "number of seeds for TestProperties")
	flagSeed  = flag.Int64("sched.seed", -1, "run TestProperties for this one seed only")
)

// TestProperties drives the scheduler with random configurations and
// workloads (pebble metamorphic style), synchronously and with an async
// batch queue of depth 2, with random arrivals and aborts, and checks after
// every call:
//   - the scheduler's internal invariants (CheckInvariants: KV blocks
//     conserved, ref counts, prefix cache index, blocks cover computed tokens,
//     placeholders in range, running <= max_num_seqs);
//   - each output: token total == sum of scheduled tokens <= budget, one
//     entry per request, no admission in a step that preempted, threshold
//     and chunked-prefill rules, prefix hits block-aligned and short of the
//     last token, Samples exactly when the step reaches the end of the known
//     tokens;
//   - each update: the tokens produced and the requests finished agree with
//     an independent count of samples per request;
//   - at the end: every request finished with exactly MaxOutputTokens tokens
//     or was aborted, each reported once in some Output.FinishedIDs, no block
//     held; and the same seed replays to the same outputs.
//
// Reproduce a failure with: go test ./sim/sched -run TestProperties -sched.seed=N
// Run more seeds with -sched.seeds=5000.
func TestProperties(t *testing.T) {
	first, n := int64(0), int64(*flagSeeds)
	if *flagSeed >= 0 {
		first, n = *flagSeed, 1
	}
	for seed := first; seed < first+n; seed++ {
		d1, err := runProperty(seed)
		if err != nil {
			t.Fatalf("seed %d: %v\nreproduce: go test ./sim/sched -run TestProperties -sched.seed=%d", seed, err, seed)
		}
		if seed%5 == 0 {
			// Replay (stats double-count these runs; they are only a gauge).
			d2, _ := runProperty(seed)
			if d1 != d2 {
				t.Fatalf("seed %d: not deterministic (%x vs %x)", seed, d1, d2)
			}
		}
	}
	t.Logf("exercised: %+v", propStats)
}

// propStats counts what the random runs exercised (printed with -v).
var propStats struct {
	runs, async, steps, preemptions, resumed, hits, aborts, discarded, samplesInFlight int
}

type propReq struct {
	r         *Request
	tokens    int // sampled tokens counted by the test
	done      bool
	aborted   bool
	reported  bool
	admitted  bool // scheduled at least once
	preempted bool // preempted and not yet resumed
}

func randomConfig(rng *rand.Rand) Config {
	bs := 1 << rng.IntN(6) // 1..32
	cfg := Config{
		BlockSize:      bs,
		MaxNumSeqs:     1 + rng.IntN(16),
		NumGPUBlocks:   2 + rng.IntN(120),
		ChunkedPrefill: rng.IntN(4) != 0,
		PrefixCaching:  rng.IntN(3) != 0,
	}
	if (cfg.NumGPUBlocks-1)*bs < 2 {
		cfg.NumGPUBlocks = 3
	}
	cap := (cfg.NumGPUBlocks - 1) * bs
	cfg.MaxModelLen = 2 + rng.IntN(min(cap, 400)-1)
	cfg.MaxNumBatchedTokens = cfg.MaxNumSeqs + rng.IntN(300)
	if !cfg.ChunkedPrefill && cfg.MaxNumBatchedTokens < cfg.MaxModelLen {
		cfg.MaxNumBatchedTokens = cfg.MaxModelLen + rng.IntN(50)
	}
	if rng.IntN(3) == 0 {
		cfg.LongPrefillTokenThreshold = 1 + rng.IntN(64)
	}
	return cfg
}

func runProperty(seed int64) (uint64, error) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	cfg := randomConfig(rng)
	s, err := New(cfg)
	if err != nil {
		return 0, fmt.Errorf("config %+v: %v", cfg, err)
	}
	async := rng.IntN(2) == 0
	fail := func(format string, args ...any) error {
		return fmt.Errorf("async=%v cfg=%+v: %s", async, cfg, fmt.Sprintf(format, args...))
	}

	// Workload: prefix families with chain hashes; requests take a leading
	// part of a family's blocks.
	nReq := 1 + rng.IntN(60)
	families := make([][]uint64, 1+rng.IntN(4))
	for f := range families {
		h := make([]uint64, cfg.MaxModelLen/cfg.BlockSize+1)
		for i := range h {
			h[i] = uint64(f+1)<<32 | uint64(i+1)
		}
		families[f] = h
	}
	reqs := make([]*propReq, 0, nReq)
	byID := map[string]*propReq{}
	for i := 0; i < nReq; i++ {
		prompt := 1 + rng.IntN(cfg.MaxModelLen-1)
		output := 1 + rng.IntN(min(cfg.MaxModelLen-prompt, 40))
		r := &Request{ID: fmt.Sprintf("r%d", i), PromptTokens: prompt, MaxOutputTokens: output}
		if full := prompt / cfg.BlockSize; full > 0 && rng.IntN(2) == 0 {
			r.BlockHashes = families[rng.IntN(len(families))][:rng.IntN(full+1)]
		}
		if rng.IntN(8) == 0 {
			r.PrecomputedTokens = rng.IntN(prompt)
		}
		reqs = append(reqs, &propReq{r: r})
	}

	propStats.runs++
	if async {
		propStats.async++
	}
	digest := fnv.New64a()
	next := 0 // next request to arrive
	var inflight []*Output
	live := func() []*propReq {
		var l []*propReq
		for _, pr := range reqs[:next] {
			if !pr.done && !pr.aborted {
				l = append(l, pr)
			}
		}
		return l
	}

	checkOutput := func(o *Output) error {
		fmt.Fprintf(digest, "%s", formatOutput(o))
		sum := 0
		seen := map[string]bool{}
		for li, list := range [2][]ScheduledReq{o.CachedReqs, o.NewReqs} {
			for _, sr := range list {
				id := sr.Req.ID
				if seen[id] {
					return fail("step %d schedules %s twice", o.StepID, id)
				}
				seen[id] = true
				pr := byID[id]
				if pr == nil || pr.done || pr.aborted {
					return fail("step %d schedules dead request %s", o.StepID, id)
				}
				if sr.NumScheduledTokens <= 0 {
					return fail("%s scheduled %d tokens", id, sr.NumScheduledTokens)
				}
				if th := cfg.LongPrefillTokenThreshold; th > 0 && sr.NumScheduledTokens > th {
					return fail("%s scheduled %d > threshold %d", id, sr.NumScheduledTokens, th)
				}
				end := sr.NumComputedTokens + sr.NumScheduledTokens
				if end > sr.NumTokens {
					return fail("%s: computed %d + scheduled %d > tokens %d", id, sr.NumComputedTokens, sr.NumScheduledTokens, sr.NumTokens)
				}
				if sr.Samples != (end == sr.NumTokens) {
					return fail("%s: samples=%v but end %d, tokens %d", id, sr.Samples, end, sr.NumTokens)
				}
				if sr.NumBlocks*cfg.BlockSize < end {
					return fail("%s: %d blocks for %d tokens", id, sr.NumBlocks, end)
				}
				if sr.IsPrefill != (sr.NumOutputTokens == 0 || sr.NumComputedTokens < sr.NumTokens-1) {
					return fail("%s: IsPrefill %v with %d outputs, computed %d of %d", id, sr.IsPrefill, sr.NumOutputTokens, sr.NumComputedTokens, sr.NumTokens)
				}
				if !sr.IsPrefill && (sr.NumScheduledTokens != 1 || !sr.Samples) {
					return fail("%s: decode step with %d tokens (samples=%v)", id, sr.NumScheduledTokens, sr.Samples)
				}
				if li == 1 { // new or resumed
					if len(sr.BlockIDs) != sr.NumBlocks {
						return fail("%s: ships %d block ids, table has %d", id, len(sr.BlockIDs), sr.NumBlocks)
					}
					if sr.PrefixHitTokens%cfg.BlockSize != 0 || sr.PrefixHitTokens >= sr.NumTokens || sr.PrefixHitTokens > sr.NumComputedTokens {
						return fail("%s: bad prefix hit %d (tokens %d computed %d)", id, sr.PrefixHitTokens, sr.NumTokens, sr.NumComputedTokens)
					}
					if !cfg.PrefixCaching && sr.PrefixHitTokens != 0 {
						return fail("%s: prefix hit with caching off", id)
					}
					if !cfg.ChunkedPrefill && cfg.LongPrefillTokenThreshold == 0 && !sr.Samples {
						return fail("%s: chunked a prompt with chunked prefill off", id)
					}
					if sr.NumTokens != sr.Req.PromptTokens+pr.tokens {
						return fail("%s: new request ships %d tokens, has %d", id, sr.NumTokens, sr.Req.PromptTokens+pr.tokens)
					}
					if sr.Resumed != pr.preempted || (!sr.Resumed && pr.admitted) {
						return fail("%s: resumed=%v but preempted=%v admitted=%v", id, sr.Resumed, pr.preempted, pr.admitted)
					}
					pr.admitted, pr.preempted = true, false
				} else if sr.BlockIDs != nil || sr.PrefixHitTokens != 0 || !pr.admitted || pr.preempted {
					return fail("%s: bad cached request (admitted=%v preempted=%v)", id, pr.admitted, pr.preempted)
				}
				sum += sr.NumScheduledTokens
			}
		}
		if sum != o.TotalScheduledTokens {
			return fail("step %d: total %d != sum %d", o.StepID, o.TotalScheduledTokens, sum)
		}
		if sum > cfg.MaxNumBatchedTokens {
			return fail("step %d: %d tokens > budget %d", o.StepID, sum, cfg.MaxNumBatchedTokens)
		}
		if len(o.PreemptedIDs) > 0 && len(o.NewReqs) > 0 {
			return fail("step %d admitted after preempting", o.StepID)
		}
		if o.NumRunning > cfg.MaxNumSeqs || o.NumRunning != s.NumRunning() || o.NumWaiting != s.NumWaiting() {
			return fail("step %d: running %d waiting %d", o.StepID, o.NumRunning, o.NumWaiting)
		}
		if o.KVBlocksUsed > o.KVBlocksTotal || o.KVBlocksTotal != cfg.NumGPUBlocks-1 {
			return fail("step %d: kv %d/%d", o.StepID, o.KVBlocksUsed, o.KVBlocksTotal)
		}
		propStats.steps++
		propStats.preemptions += len(o.PreemptedIDs)
		for _, sr := range o.NewReqs {
			if sr.Resumed {
				propStats.resumed++
			}
			if sr.PrefixHitTokens > 0 {
				propStats.hits++
			}
		}
		for _, sr := range o.CachedReqs {
			if sr.Samples && sr.NumOutputTokens > byID[sr.Req.ID].tokens {
				propStats.samplesInFlight++
			}
		}
		for _, id := range o.PreemptedIDs {
			pr := byID[id]
			if pr == nil || pr.done || pr.aborted || seen[id] || !pr.admitted || pr.preempted {
				return fail("step %d preempts %s wrongly", o.StepID, id)
			}
			pr.preempted = true
		}
		for _, id := range o.FinishedIDs {
			pr := byID[id]
			if pr == nil || !(pr.done || pr.aborted) || pr.reported {
				return fail("step %d reports %s finished wrongly", o.StepID, id)
			}
			pr.reported = true
		}
		return nil
	}

	update := func(o *Output) error {
		want := 0
		var wantDone []string
		for _, list := range [2][]ScheduledReq{o.CachedReqs, o.NewReqs} {
			for _, sr := range list {
				pr := byID[sr.Req.ID]
				if sr.Samples && (pr.done || pr.aborted) {
					propStats.discarded++
				}
				if !sr.Samples || pr.done || pr.aborted {
					continue
				}
				want++
				pr.tokens++
				if pr.tokens == pr.r.MaxOutputTokens {
					pr.done = true
					wantDone = append(wantDone, pr.r.ID)
				}
			}
		}
		res := s.Update(o)
		fmt.Fprintf(digest, "%v %d\n", res.FinishedIDs, res.Sampled)
		if res.Sampled != want {
			return fail("update: sampled %d, want %d", res.Sampled, want)
		}
		if fmt.Sprint(res.FinishedIDs) != fmt.Sprint(wantDone) {
			return fail("update: finished %v, want %v", res.FinishedIDs, wantDone)
		}
		return nil
	}

	for step := 0; ; step++ {
		if step > 200000 {
			return 0, fail("no progress after %d iterations (livelock?)", step)
		}
		// Arrivals.
		if next < len(reqs) && (rng.IntN(3) == 0 || !s.HasUnfinished()) {
			for k := 1 + rng.IntN(4); k > 0 && next < len(reqs); k-- {
				pr := reqs[next]
				if err := s.Add(pr.r); err != nil {
					return 0, fail("add %s: %v", pr.r.ID, err)
				}
				byID[pr.r.ID] = pr
				next++
			}
		}
		// Aborts.
		if rng.IntN(40) == 0 {
			if l := live(); len(l) > 0 {
				pr := l[rng.IntN(len(l))]
				if !s.Abort(pr.r.ID) {
					return 0, fail("abort %s refused", pr.r.ID)
				}
				pr.aborted = true
				propStats.aborts++
				fmt.Fprintf(digest, "abort %s\n", pr.r.ID)
			}
		}
		if err := s.CheckInvariants(); err != nil {
			return 0, fail("after arrivals: %v", err)
		}
		if next == len(reqs) && !s.HasUnfinished() && len(inflight) == 0 {
			break
		}
		o := s.Schedule()
		if err := checkOutput(o); err != nil {
			return 0, err
		}
		if err := s.CheckInvariants(); err != nil {
			return 0, fail("after schedule %d: %v", o.StepID, err)
		}
		if !async {
			if err := update(o); err != nil {
				return 0, err
			}
		} else {
			if !o.Empty() {
				inflight = append(inflight, o)
			} else {
				s.Update(o) // recycled; produces nothing
			}
			if len(inflight) == 2 || (o.Empty() && len(inflight) > 0) {
				if err := update(inflight[0]); err != nil {
					return 0, err
				}
				inflight = inflight[1:]
			}
		}
		if err := s.CheckInvariants(); err != nil {
			return 0, fail("after update: %v", err)
		}
		if s.InFlight() != len(inflight) {
			return 0, fail("InFlight %d, want %d", s.InFlight(), len(inflight))
		}
	}
	// Flush the last finished ids.
	if err := checkOutput(s.Schedule()); err != nil {
		return 0, err
	}
	for _, pr := range reqs {
		switch {
		case pr.aborted:
		case !pr.done:
			return 0, fail("%s never finished", pr.r.ID)
		case pr.tokens != pr.r.MaxOutputTokens:
			return 0, fail("%s finished with %d tokens", pr.r.ID, pr.tokens)
		}
		if !pr.reported {
			return 0, fail("%s never reported in FinishedIDs", pr.r.ID)
		}
	}
	if s.KVBlocksUsed() != 0 {
		return 0, fail("%d blocks still used", s.KVBlocksUsed())
	}
	return digest.Sum64(), nil
}
