package sched

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/steplab/steplab/internal/invariants"
	"github.com/steplab/steplab/internal/slab"
)

// maxPlaceholders is the most sampled-but-unreconciled steps one request may
// have: a request is scheduled again while it has fewer than this many
// placeholders. With the engine's batch queue depth of 2 (schedule N+1 before
// Update(N), never N+2 before Update(N)) a request has at most one
// placeholder when Schedule runs, so the rule never binds; it only keeps a
// deeper pipeline from running ahead of a request's outputs.
const maxPlaceholders = 2

// Scheduler is a deterministic model of vLLM v1's scheduler and KV cache
// manager. See the package documentation for the driving protocol.
type Scheduler struct {
	cfg  Config
	pool *blockPool

	reqs    map[string]*reqState // live (unfinished) requests, for Add/Abort lookups only
	states  slab.Slab[reqState]
	running []*reqState
	waiting deque

	nextStep   int64 // id of the next non-empty output
	nextUpdate int64 // id of the next output Update expects

	finishedPending []string // finished since the last Schedule
	free            []*Output
	res             UpdateResult
	hitBuf          []int
	spare           [32][][]int32 // recycled block tables and own[] indexes, by log2 capacity
	bsShift         uint          // log2(BlockSize)
	checks          int           // checkStep calls (invariants build)
}

// New returns an empty scheduler, or the error of cfg.Validate.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Scheduler{
		cfg:  cfg,
		pool: newBlockPool(cfg.NumGPUBlocks, cfg.PrefixCaching),
		reqs: make(map[string]*reqState),
	}
	for 1<<s.bsShift < cfg.BlockSize {
		s.bsShift++
	}
	return s, nil
}

// Config returns the scheduler's configuration.
func (s *Scheduler) Config() Config { return s.cfg }

// ErrRejected wraps every error of Add: the request was not queued.
var ErrRejected = errors.New("sched: request rejected")

// Add queues an arriving request at the back of WAITING. It returns an error
// (wrapping ErrRejected; the request is not queued) when the request is
// malformed, its id is live already, PromptTokens+MaxOutputTokens exceeds
// MaxModelLen, or its KV could never fit in the usable blocks.
func (s *Scheduler) Add(r *Request) error {
	if r == nil {
		return fmt.Errorf("%w: nil request", ErrRejected)
	}
	bs := s.cfg.BlockSize
	switch {
	case r.PromptTokens < 1:
		return fmt.Errorf("%w: %q has %d prompt tokens; need at least 1", ErrRejected, r.ID, r.PromptTokens)
	case r.MaxOutputTokens < 1:
		return fmt.Errorf("%w: %q has max output %d; need at least 1", ErrRejected, r.ID, r.MaxOutputTokens)
	case r.PrecomputedTokens < 0 || r.PrecomputedTokens >= r.PromptTokens:
		return fmt.Errorf("%w: %q has %d precomputed tokens; need 0 <= precomputed < prompt (%d)", ErrRejected, r.ID, r.PrecomputedTokens, r.PromptTokens)
	case len(r.BlockHashes) > r.PromptTokens/bs:
		return fmt.Errorf("%w: %q has %d block hashes but only %d full prompt blocks", ErrRejected, r.ID, len(r.BlockHashes), r.PromptTokens/bs)
	case r.PromptTokens+r.MaxOutputTokens > s.cfg.MaxModelLen:
		return fmt.Errorf("%w: %q needs %d+%d tokens, more than max_model_len %d", ErrRejected, r.ID, r.PromptTokens, r.MaxOutputTokens, s.cfg.MaxModelLen)
	case ceilDiv(r.PromptTokens+r.MaxOutputTokens-1, bs) > s.pool.usable():
		// The last sampled token is never fed back, so its KV is never needed.
		return fmt.Errorf("%w: %q needs %d KV blocks, more than the %d usable", ErrRejected, r.ID, ceilDiv(r.PromptTokens+r.MaxOutputTokens-1, bs), s.pool.usable())
	}
	if _, dup := s.reqs[r.ID]; dup {
		return fmt.Errorf("%w: id %q is already queued or running", ErrRejected, r.ID)
	}
	st := s.states.New()
	st.r, st.prompt, st.maxOut = r, r.PromptTokens, r.MaxOutputTokens
	s.reqs[r.ID] = st
	s.waiting.pushBack(st)
	return nil
}

// NumWaiting is the length of the WAITING queue (new and preempted).
func (s *Scheduler) NumWaiting() int { return s.waiting.len() }

// NumRunning is the number of RUNNING requests.
func (s *Scheduler) NumRunning() int { return len(s.running) }

// KVBlocksUsed is the number of blocks held by requests (ref count > 0).
func (s *Scheduler) KVBlocksUsed() int { return s.pool.used() }

// KVBlocksTotal is the number of usable blocks: NumGPUBlocks-1 (vLLM keeps
// block 0 as the null block).
func (s *Scheduler) KVBlocksTotal() int { return s.pool.usable() }

// KVBlocksEvictable is the number of free blocks that still hold a cached
// prefix (they count as free; allocation evicts them in LRU order).
func (s *Scheduler) KVBlocksEvictable() int { return s.pool.numEvict }

// CachedPrefix is the number of leading blocks of a prompt, given by its
// chain hashes (Request.BlockHashes), that the prefix cache holds now: the
// overlap a KV-aware router scores a worker by. It only reads: nothing is
// touched, reordered or allocated. 0 without prefix caching.
func (s *Scheduler) CachedPrefix(hashes []uint64) int {
	for i, h := range hashes {
		if _, ok := s.pool.lookup(h); !ok {
			return i
		}
	}
	return len(hashes)
}

// HasUnfinished reports whether any request is waiting or running.
func (s *Scheduler) HasUnfinished() bool { return len(s.running) > 0 || s.waiting.len() > 0 }

// InFlight is the number of non-empty outputs scheduled but not yet passed
// to Update.
func (s *Scheduler) InFlight() int { return int(s.nextStep - s.nextUpdate) }

func (s *Scheduler) getOutput() *Output {
	var o *Output
	if n := len(s.free); n > 0 {
		o = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		o = &Output{}
	}
	o.reset()
	return o
}

func (s *Scheduler) blocksFor(tokens int) int { return (tokens + s.cfg.BlockSize - 1) >> s.bsShift }

// Schedule decides the next step (vLLM Scheduler.schedule followed by
// _update_after_schedule): RUNNING requests first, in order, within the
// token budget, preempting from the back of RUNNING when KV blocks run out;
// then, only if nothing was preempted, WAITING requests in order while
// running < MaxNumSeqs and blocks and budget allow. It advances each
// scheduled request's computed tokens immediately and counts an output
// placeholder for each request that will sample, so Schedule may be called
// again before the Update of this output (async scheduling).
//
// The returned Output follows the ownership rule documented on Output.
func (s *Scheduler) Schedule() *Output {
	out := s.getOutput()
	budget, preempted := s.scheduleRunning(out, s.cfg.MaxNumBatchedTokens)
	if !preempted {
		budget = s.scheduleWaiting(out, budget)
	}
	s.closeOutput(out, budget)
	return out
}

// scheduleRunning is the RUNNING half of Schedule: each running request in
// order gets its tokens within budget, preempting from the back of RUNNING
// when KV blocks run out. It returns the budget left and whether it
// preempted (then nothing is admitted this step).
func (s *Scheduler) scheduleRunning(out *Output, budget int) (int, bool) {
	cfg := &s.cfg
	thr := cfg.LongPrefillTokenThreshold
	preempted := false
	for i := 0; i < len(s.running) && budget > 0; {
		st := s.running[i]
		if st.placeholders > 0 && (st.output+st.placeholders >= st.maxOut || st.placeholders >= maxPlaceholders) {
			// The in-flight steps already produce the request's last token
			// (vLLM's async check), or the per-request depth is reached.
			i++
			continue
		}
		n := st.numTokens() + st.placeholders - st.computed
		if thr > 0 && n > thr {
			n = thr
		}
		if n > budget {
			n = budget
		}
		if lim := cfg.MaxModelLen - 1 - st.computed; n > lim {
			n = lim
		}
		if n <= 0 {
			i++
			continue
		}
		need := s.blocksFor(st.computed+n) - len(st.blocks)
		ok := true
		for need > s.pool.numFree {
			victim := s.running[len(s.running)-1]
			s.running = s.running[:len(s.running)-1]
			s.preempt(victim, out)
			preempted = true
			if victim == st {
				ok = false
				break
			}
		}
		if !ok {
			break
		}
		nb := len(out.blockBuf)
		if need > 0 {
			old := len(st.blocks)
			st.blocks = s.pool.allocate(need, st.blocks)
			for _, b := range st.blocks[old:] {
				out.blockBuf = append(out.blockBuf, int(b))
			}
		}
		if cfg.PrefixCaching && min(st.computed+n, st.numTokens())>>s.bsShift > st.numCached {
			s.cacheUpTo(st, min(st.computed+n, st.numTokens()))
		}
		sr := appendReq(&out.CachedReqs)
		sr.Req, sr.st = st.r, st
		sr.NumScheduledTokens, sr.NumComputedTokens, sr.NumOutputTokens = n, st.computed, st.output+st.placeholders
		if need > 0 { // most steps take no block: the list stays empty (nil)
			sr.NewBlockIDs = out.blockBuf[nb:len(out.blockBuf):len(out.blockBuf)]
		}
		s.advance(sr)
		budget -= n
		i++
	}
	return budget, preempted
}

// scheduleWaiting is the WAITING half of Schedule: requests in order are
// admitted while running < MaxNumSeqs and blocks and budget allow, their
// cached prefix counted as computed. It returns the budget left.
func (s *Scheduler) scheduleWaiting(out *Output, budget int) int {
	cfg := &s.cfg
	thr := cfg.LongPrefillTokenThreshold
	for s.waiting.len() > 0 && budget > 0 {
		if len(s.running) >= cfg.MaxNumSeqs {
			break
		}
		st := s.waiting.front()
		if st.placeholders > 0 {
			// A preempted request whose last output is still in flight
			// (only possible with a pipeline deeper than 2): wait for it.
			break
		}
		evictable := s.prefixHits(st)
		hits := s.hitBuf
		hitTokens := len(hits) * cfg.BlockSize
		computed := hitTokens
		if !st.admitted && st.r.PrecomputedTokens > computed {
			computed = st.r.PrecomputedTokens
		}
		n := st.numTokens() - computed
		if thr > 0 && n > thr {
			n = thr
		}
		if !cfg.ChunkedPrefill && n > budget {
			break
		}
		if n > budget {
			n = budget
		}
		fresh := s.blocksFor(computed+n) - len(hits)
		if fresh+evictable > s.pool.numFree {
			break
		}
		s.waiting.popFront()
		s.admit(out, st, fresh, computed, n)
		budget -= n
	}
	return budget
}

// prefixHits looks the waiting request's prompt up in the prefix cache
// (never its last token) and leaves the cached blocks in s.hitBuf. It
// returns how many of them are evictable, which admitting it takes out of
// the free pool.
func (s *Scheduler) prefixHits(st *reqState) (evictable int) {
	hits := s.hitBuf[:0]
	if s.cfg.PrefixCaching {
		maxBlocks := (st.numTokens() - 1) / s.cfg.BlockSize
		for b := 0; b < maxBlocks; b++ {
			blk, ok := s.lookupBlock(st, b)
			if !ok {
				break
			}
			hits = append(hits, blk)
			if s.pool.q[blk].ref == 0 {
				evictable++
			}
		}
	}
	s.hitBuf = hits
	return evictable
}

// admit moves the waiting request st to RUNNING with the cached blocks of
// s.hitBuf and fresh new ones, computed tokens already computed and n
// scheduled, and adds it to the step's new requests.
func (s *Scheduler) admit(out *Output, st *reqState, fresh, computed, n int) {
	hits := s.hitBuf
	for _, b := range hits {
		s.pool.touch(b)
	}
	if st.blocks == nil {
		// Sized once for the request's lifetime (its KV never exceeds
		// prompt + max output - 1 tokens), recycled when it finishes.
		st.blocks = s.spareSlice(s.blocksFor(st.prompt + st.maxOut - 1))
		if s.cfg.PrefixCaching {
			st.own = s.spareSlice(cap(st.blocks))
		}
	}
	st.blocks = st.blocks[:0]
	for _, b := range hits {
		st.blocks = append(st.blocks, int32(b))
	}
	st.blocks = s.pool.allocate(fresh, st.blocks)
	st.numCached = len(hits)
	resumed := st.status == statusPreempted
	st.status = statusRunning
	st.admitted = true
	st.computed = computed
	s.cacheUpTo(st, min(computed+n, st.numTokens()))
	s.running = append(s.running, st)

	nb := len(out.blockBuf)
	for _, b := range st.blocks {
		out.blockBuf = append(out.blockBuf, int(b))
	}
	end := len(out.blockBuf)
	sr := appendReq(&out.NewReqs)
	sr.Req, sr.st = st.r, st
	sr.NumScheduledTokens, sr.NumComputedTokens, sr.NumOutputTokens = n, computed, st.output
	sr.Resumed, sr.PrefixHitTokens = resumed, len(hits)*s.cfg.BlockSize
	sr.NewBlockIDs, sr.BlockIDs = out.blockBuf[nb+len(hits):end:end], out.blockBuf[nb:end:end]
	s.advance(sr)
}

// closeOutput fills the step's totals and queue state, hands over the ids
// finished since the last step, and numbers a non-empty step.
func (s *Scheduler) closeOutput(out *Output, budget int) {
	out.TotalScheduledTokens = s.cfg.MaxNumBatchedTokens - budget
	out.FinishedIDs = append(out.FinishedIDs, s.finishedPending...)
	clear(s.finishedPending)
	s.finishedPending = s.finishedPending[:0]
	out.NumWaiting = s.waiting.len()
	out.NumRunning = len(s.running)
	out.KVBlocksUsed = s.pool.used()
	out.KVBlocksTotal = s.pool.usable()
	if !out.Empty() {
		out.StepID = s.nextStep
		s.nextStep++
	}
	if invariants.Enabled {
		s.checkStep("Schedule", out)
	}
}

// advance is vLLM's _update_after_schedule for one scheduled request:
// computed tokens advance at once, and a request whose step reaches the end
// of its known tokens (prompt + outputs + placeholders) will sample, so it
// gets one more placeholder. Doing it per request while scheduling is
// equivalent to vLLM's pass after schedule(): a request is scheduled at most
// once per step and FCFS preemption never picks one already scheduled.
func (s *Scheduler) advance(sr *ScheduledReq) {
	st := sr.st
	sr.NumTokens = st.prompt + sr.NumOutputTokens
	sr.IsPrefill = sr.NumOutputTokens == 0 || sr.NumComputedTokens < sr.NumTokens-1
	sr.NumBlocks = len(st.blocks)
	st.computed += sr.NumScheduledTokens
	if st.computed >= st.numTokens()+st.placeholders {
		sr.Samples = true
		st.placeholders++
	}
}

// cacheUpTo registers the request's full blocks covering its first ntok
// tokens in the prefix cache (vLLM cache_blocks); blocks already registered
// are skipped.
func (s *Scheduler) cacheUpTo(st *reqState, ntok int) {
	if !s.cfg.PrefixCaching {
		return
	}
	full := ntok >> s.bsShift
	if full > len(st.blocks) {
		full = len(st.blocks)
	}
	// A shared block enters the prefix cache as soon as it is full: other
	// requests may hit it at once. A unique block can be hit only by its own
	// request after a preemption, so registerOwn registers it then; most
	// requests are never preempted and never pay for it.
	for i := st.numCached; i < min(full, len(st.r.BlockHashes)); i++ {
		s.pool.insert(int(st.blocks[i]), st.r.BlockHashes[i])
	}
	if full > st.numCached {
		st.numCached = full
	}
}

// registerOwn puts st's full unique blocks into the prefix cache as it is
// preempted, so that it can hit them when it resumes. Blocks it hit on an
// earlier resume are registered already.
func (s *Scheduler) registerOwn(st *reqState) {
	for i := len(st.r.BlockHashes); i < st.numCached; i++ {
		if b := int(st.blocks[i]); !s.pool.hashed.has(b) {
			s.pool.insertUnique(b, st, i)
		}
	}
}

// spareSlice returns an empty slice with capacity >= n, recycled if one is
// available (capacities are powers of two).
func (s *Scheduler) spareSlice(n int) []int32 {
	c := bits.Len(uint(max(n, 1) - 1)) // smallest k with 1<<k >= n
	if l := len(s.spare[c]); l > 0 {
		x := s.spare[c][l-1]
		s.spare[c] = s.spare[c][:l-1]
		return x
	}
	return make([]int32, 0, 1<<c)
}

// recycle keeps a finished request's slice for a later request.
func (s *Scheduler) recycle(x []int32) {
	if c := cap(x); c > 0 && c&(c-1) == 0 && len(s.spare[bits.Len(uint(c-1))]) < 1024 {
		k := bits.Len(uint(c - 1))
		s.spare[k] = append(s.spare[k], x[:0])
	}
}

// lookupBlock finds a cached block for block i of the request: by the
// caller's chain hash for leading prompt blocks, otherwise among the
// request's own unique blocks.
func (s *Scheduler) lookupBlock(st *reqState, i int) (int, bool) {
	if i < len(st.r.BlockHashes) {
		return s.pool.lookup(st.r.BlockHashes[i])
	}
	return s.pool.lookupUnique(st, i)
}

// preempt frees a running request's blocks and puts it at the front of
// WAITING with its computed tokens reset (recompute). The caller has removed
// it from the running list.
func (s *Scheduler) preempt(st *reqState, out *Output) {
	s.registerOwn(st)
	s.pool.free(st.blocks)
	st.blocks = st.blocks[:0]
	st.numCached = 0
	st.computed = 0
	st.status = statusPreempted
	st.preemptions++
	s.waiting.pushFront(st)
	out.PreemptedIDs = append(out.PreemptedIDs, st.r.ID)
}

// release frees a request's blocks and marks it finished. The caller removes
// it from its queue.
func (s *Scheduler) release(st *reqState) {
	s.pool.dropUnique(st)
	s.pool.free(st.blocks)
	s.recycle(st.blocks)
	s.recycle(st.own)
	st.blocks, st.own = nil, nil
	st.numCached = 0
	st.status = statusFinished
	delete(s.reqs, st.r.ID)
	s.finishedPending = append(s.finishedPending, st.r.ID)
}

// Update reconciles a step's results (vLLM update_from_output): every
// request of out that samples produces one token (its placeholder becomes a
// real token); a request reaching MaxOutputTokens finishes, frees its blocks
// and leaves its full blocks in the prefix cache (evictable). Requests that
// finished or were aborted after out was scheduled are skipped: their work in
// out is discarded and produces nothing. A request preempted after out was
// scheduled still receives its token (it was computed), as in vLLM.
//
// Outputs must be updated in StepID order (an out-of-order Update panics).
// Update recycles out; the result is valid until the next Update.
func (s *Scheduler) Update(out *Output) *UpdateResult {
	res := &s.res
	res.FinishedIDs = res.FinishedIDs[:0]
	res.Sampled = 0
	if out.StepID < 0 {
		s.free = append(s.free, out)
		return res
	}
	if out.StepID != s.nextUpdate {
		panic(fmt.Sprintf("sched: Update(step %d) but step %d is the oldest in flight", out.StepID, s.nextUpdate))
	}
	s.nextUpdate++
	removedRunning := false
	for k := range 2 { // ranging over an array of the two lists copies it
		list := out.CachedReqs
		if k == 1 {
			list = out.NewReqs
		}
		for i := range list {
			sr := &list[i]
			st := sr.st
			if !sr.Samples || st.status == statusFinished {
				continue
			}
			st.placeholders--
			st.output++
			res.Sampled++
			running := st.status == statusRunning
			if running && s.cfg.PrefixCaching && (st.computed-st.placeholders)>>s.bsShift > st.numCached {
				s.cacheUpTo(st, st.computed-st.placeholders)
			}
			if st.output >= st.maxOut || st.numTokens() >= s.cfg.MaxModelLen {
				if running {
					removedRunning = true
				} else {
					s.waiting.remove(st)
				}
				s.release(st)
				res.FinishedIDs = append(res.FinishedIDs, st.r.ID)
			}
		}
	}
	if removedRunning {
		k := 0
		for _, st := range s.running {
			if st.status != statusFinished {
				s.running[k] = st
				k++
			}
		}
		clear(s.running[k:])
		s.running = s.running[:k]
	}
	if invariants.Enabled {
		s.checkStep("Update", out)
	}
	s.free = append(s.free, out)
	return res
}

// Abort finishes a live request at once (vLLM finish_requests with
// FINISHED_ABORTED): its blocks are freed and it is reported in the next
// Output's FinishedIDs. Work already scheduled for it in in-flight outputs is
// discarded by Update. It returns false if id is not live.
func (s *Scheduler) Abort(id string) bool {
	st, ok := s.reqs[id]
	if !ok {
		return false
	}
	if st.status == statusRunning {
		for i, r := range s.running {
			if r == st {
				copy(s.running[i:], s.running[i+1:])
				s.running[len(s.running)-1] = nil
				s.running = s.running[:len(s.running)-1]
				break
			}
		}
	} else {
		s.waiting.remove(st)
	}
	s.release(st)
	return true
}
