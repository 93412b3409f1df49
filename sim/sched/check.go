package sched

import (
	"fmt"

	"github.com/steplab/steplab/internal/invariants"
)

// CheckInvariants verifies the scheduler's internal consistency and returns
// the first violation found. It costs O(blocks + requests); tests call it,
// and a build with the invariants tag runs it after every Schedule and
// Update (checkStep), never a production run.
//
// It checks the block pool (blockPool.check: used + free == usable blocks,
// evictable cached blocks are free blocks, the free queue is a consistent
// list of ref-0 blocks, the prefix cache index and the blocks' hashes
// agree); every block's ref count equals the number of block tables
// holding it; running requests' blocks cover their computed tokens,
// placeholders are within [0, 2], running <= MaxNumSeqs; waiting requests
// hold no blocks and have no computed tokens; every live request is in
// exactly one queue (none both running and waiting).
func (s *Scheduler) CheckInvariants() error {
	p := s.pool
	bs := s.cfg.BlockSize
	if err := p.check(); err != nil {
		return err
	}
	// Reference counts against block tables.
	refs := make([]int32, p.n)
	refs[0] = 1
	if len(s.running) > s.cfg.MaxNumSeqs {
		return fmt.Errorf("%d running > max_num_seqs %d", len(s.running), s.cfg.MaxNumSeqs)
	}
	for _, st := range s.running {
		if st.status != statusRunning {
			return fmt.Errorf("%s in running with status %v", st.r.ID, st.status)
		}
		if len(st.blocks)*bs < st.computed {
			return fmt.Errorf("%s: %d blocks do not cover %d computed tokens", st.r.ID, len(st.blocks), st.computed)
		}
		if st.computed > st.numTokens()+st.placeholders {
			return fmt.Errorf("%s: computed %d > tokens %d + placeholders %d", st.r.ID, st.computed, st.numTokens(), st.placeholders)
		}
		if st.numCached > len(st.blocks) {
			return fmt.Errorf("%s: %d cached blocks > %d blocks", st.r.ID, st.numCached, len(st.blocks))
		}
		for i, b32 := range st.blocks {
			b := int(b32)
			if b <= 0 || b >= p.n {
				return fmt.Errorf("%s: bad block id %d", st.r.ID, b)
			}
			refs[b]++
			if i < st.numCached && s.cfg.PrefixCaching {
				ok := p.hashed.has(b)
				if i < len(st.r.BlockHashes) {
					ok = ok && p.m[b].owner == 0 && p.m[b].hash == st.r.BlockHashes[i]
				} else {
					// Registered at a preemption, or not yet (registerOwn).
					ok = !ok || p.ownerOf(b) == st && int(p.m[b].ownIdx) == i
				}
				if !ok {
					return fmt.Errorf("%s: block %d (#%d) should be cached with its identity", st.r.ID, b, i)
				}
			}
		}
	}
	for i := 0; i < s.waiting.len(); i++ {
		st := s.waiting.at(i)
		if st.status != statusWaiting && st.status != statusPreempted {
			return fmt.Errorf("%s in waiting with status %v", st.r.ID, st.status)
		}
		if len(st.blocks) != 0 || st.computed != 0 {
			return fmt.Errorf("waiting %s holds %d blocks, %d computed", st.r.ID, len(st.blocks), st.computed)
		}
	}
	for b := 1; b < p.n; b++ {
		if refs[b] != p.q[b].ref {
			return fmt.Errorf("block %d: ref %d but held by %d tables", b, p.q[b].ref, refs[b])
		}
	}
	if p.caching {
		n := 0
		for _, head := range p.cache { // order-independent count
			for c := head; c != noBlock; c = p.m[c].dupNext {
				n++
			}
		}
		for _, st := range s.allLive() {
			for _, head := range st.own {
				for c := head; c != noBlock; c = p.m[c].dupNext {
					n++
				}
			}
		}
		if n != p.numCachedBlocks() {
			return fmt.Errorf("cache indexes hold %d blocks, %d are hashed", n, p.numCachedBlocks())
		}
	}
	for _, st := range s.allLive() {
		if st.placeholders < 0 || st.placeholders > maxPlaceholders {
			return fmt.Errorf("%s: placeholders %d", st.r.ID, st.placeholders)
		}
		if st.output >= st.maxOut {
			return fmt.Errorf("%s: live with %d outputs >= max %d", st.r.ID, st.output, st.maxOut)
		}
		if s.reqs[st.r.ID] != st {
			return fmt.Errorf("%s: live but not indexed", st.r.ID)
		}
	}
	if len(s.reqs) != len(s.running)+s.waiting.len() {
		return fmt.Errorf("%d indexed requests, %d running + %d waiting", len(s.reqs), len(s.running), s.waiting.len())
	}
	return nil
}

func (s *Scheduler) allLive() []*reqState {
	out := make([]*reqState, 0, len(s.running)+s.waiting.len())
	out = append(out, s.running...)
	for i := 0; i < s.waiting.len(); i++ {
		out = append(out, s.waiting.at(i))
	}
	return out
}

// check verifies the pool alone: used + free == usable blocks, the free
// queue is a consistent list of ref-0 blocks with the evictable cached
// ones counted, and every cached block sits in its cache index's chain
// with its identity.
func (p *blockPool) check() error {
	if p.used()+p.numFree != p.usable() {
		return fmt.Errorf("used %d + free %d != usable %d", p.used(), p.numFree, p.usable())
	}
	// Free queue.
	seen := 0
	evict := 0
	if p.head < 0 || p.head > p.tail || int(p.tail) > len(p.fifo) {
		return fmt.Errorf("free queue: bounds [%d, %d) of %d", p.head, p.tail, len(p.fifo))
	}
	for i := p.head; i < p.tail; i++ {
		b := p.fifo[i]
		if b == noBlock {
			continue
		}
		if b <= 0 || int(b) >= p.n {
			return fmt.Errorf("free queue: entry %d names block %d", i, b)
		}
		if !p.inFree.has(int(b)) || p.q[b].pos != i {
			return fmt.Errorf("free queue: entry %d names block %d, which is not queued there", i, b)
		}
		if p.q[b].ref != 0 {
			return fmt.Errorf("free queue: block %d has ref %d", b, p.q[b].ref)
		}
		if p.hashed.has(int(b)) {
			evict++
		}
		seen++
	}
	for b := 1; b < p.n; b++ {
		if pos := p.q[b].pos; p.inFree.has(b) && (pos < p.head || pos >= p.tail || int(p.fifo[pos]) != b) {
			return fmt.Errorf("free queue: block %d marked free but not queued", b)
		}
	}
	if seen != p.numFree {
		return fmt.Errorf("free queue has %d blocks, numFree %d", seen, p.numFree)
	}
	if evict != p.numEvict {
		return fmt.Errorf("free queue has %d cached blocks, numEvict %d", evict, p.numEvict)
	}
	for b := 1; b < p.n; b++ {
		if (p.q[b].ref == 0) != p.inFree.has(b) {
			return fmt.Errorf("block %d: ref %d inFree %v", b, p.q[b].ref, p.inFree.has(b))
		}
		if p.hashed.has(b) {
			if !p.caching {
				return fmt.Errorf("block %d hashed with prefix caching off", b)
			}
			var head int32
			if o := p.ownerOf(b); o != nil {
				if o.status == statusFinished || int(p.m[b].ownIdx) >= len(o.own) {
					return fmt.Errorf("block %d cached for finished or unindexed %s", b, o.r.ID)
				}
				head = o.own[p.m[b].ownIdx]
			} else {
				h, ok := p.cache[p.m[b].hash]
				if !ok {
					return fmt.Errorf("block %d hashed but missing from the cache index", b)
				}
				if p.chainHead.has(b) != (int(h) == b) {
					return fmt.Errorf("block %d: head mark %v, the cache index points at block %d", b, p.chainHead.has(b), h)
				}
				head = h
			}
			found := false
			for c := head; c != noBlock; c = p.m[c].dupNext {
				if int(c) == b {
					found = true
				}
				if !p.hashed.has(int(c)) || p.m[c].owner != p.m[b].owner || p.m[c].hash != p.m[b].hash || p.m[c].ownIdx != p.m[b].ownIdx && p.m[b].owner != 0 {
					return fmt.Errorf("cache chain of block %d holds block %d with another identity", b, c)
				}
			}
			if !found {
				return fmt.Errorf("block %d missing from its cache chain", b)
			}
		} else if p.m[b].owner != 0 {
			return fmt.Errorf("block %d uncached but owned", b)
		}
		if p.caching && p.chainHead.has(b) && (!p.hashed.has(b) || p.m[b].owner != 0) {
			return fmt.Errorf("block %d marked a cache head but not a cached shared block", b)
		}
	}
	return nil
}

// auditBlocks sets how often checkStep audits the whole scheduler
// (CheckInvariants, O(blocks + requests)): every ⌊blocks/auditBlocks⌋-th
// call, so that the audit costs about auditBlocks block visits a call
// whatever the pool's size, and every call on a pool of at most
// auditBlocks blocks.
const auditBlocks = 64

// checkStep panics, under the invariants build tag, when the scheduler is
// inconsistent after a Schedule or Update call. Every call checks what
// costs O(running + scheduled): running within max_num_seqs and every
// running request's blocks covering its computed tokens; evictable <=
// free <= usable KV blocks; every live request in one queue; for a
// Schedule, the output's tokens the sum of its requests', each at least
// one, within max_num_batched_tokens, at most max_num_seqs requests, and
// the queue and KV state it reports the scheduler's. The whole audit
// (CheckInvariants: KV blocks used + free = usable with every ref count
// held by a block table, no request both running and waiting, the prefix
// cache index) runs at the pace auditBlocks sets.
func (s *Scheduler) checkStep(call string, out *Output) {
	fail := func(format string, args ...any) {
		invariants.Failf("sched: after %s of step %d: %s", call, out.StepID, fmt.Sprintf(format, args...))
	}
	if s.checks++; s.checks%max(1, s.pool.n/auditBlocks) == 0 {
		if err := s.CheckInvariants(); err != nil {
			fail("%v", err)
		}
	}
	p, bs := s.pool, s.cfg.BlockSize
	switch {
	case len(s.running) > s.cfg.MaxNumSeqs:
		fail("%d running > max_num_seqs %d", len(s.running), s.cfg.MaxNumSeqs)
	case p.numEvict > p.numFree || p.numFree > p.usable() || int(p.tail-p.head) < p.numFree:
		fail("KV blocks: %d evictable, %d free, %d usable, %d in the free queue", p.numEvict, p.numFree, p.usable(), p.tail-p.head)
	case len(s.reqs) != len(s.running)+s.waiting.len():
		fail("%d live requests, %d running + %d waiting", len(s.reqs), len(s.running), s.waiting.len())
	}
	for _, st := range s.running {
		if st.status != statusRunning || len(st.blocks)*bs < st.computed || st.placeholders < 0 || st.placeholders > maxPlaceholders {
			fail("running %s: status %v, %d blocks for %d computed tokens, %d placeholders", st.r.ID, st.status, len(st.blocks), st.computed, st.placeholders)
		}
	}
	if call == "Schedule" {
		s.checkOutput(out, fail)
	}
}

// checkOutput is checkStep's part for a Schedule's output.
func (s *Scheduler) checkOutput(out *Output, fail func(string, ...any)) {
	sum := 0
	for k := range 2 {
		list := out.NewReqs
		if k == 1 {
			list = out.CachedReqs
		}
		for i := range list {
			if n := list[i].NumScheduledTokens; n < 1 {
				fail("%d tokens scheduled for %s", n, list[i].Req.ID)
			}
			sum += list[i].NumScheduledTokens
		}
	}
	switch {
	case sum != out.TotalScheduledTokens:
		fail("total_scheduled_tokens %d, its requests' sum %d", out.TotalScheduledTokens, sum)
	case sum > s.cfg.MaxNumBatchedTokens:
		fail("%d tokens scheduled > max_num_batched_tokens %d", sum, s.cfg.MaxNumBatchedTokens)
	case out.NumScheduledReqs() > s.cfg.MaxNumSeqs:
		fail("%d requests scheduled > max_num_seqs %d", out.NumScheduledReqs(), s.cfg.MaxNumSeqs)
	case out.NumRunning != len(s.running) || out.NumWaiting != s.waiting.len() || out.KVBlocksUsed != s.pool.used():
		fail("the output reports %d running, %d waiting, %d KV blocks used; the scheduler has %d, %d, %d",
			out.NumRunning, out.NumWaiting, out.KVBlocksUsed, len(s.running), s.waiting.len(), s.pool.used())
	}
}
