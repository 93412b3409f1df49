package sched

// blockPool is the KV block manager: a fixed set of blocks, a free queue in
// eviction order (LRU: allocation takes the head, freeing appends to the
// tail, a prefix hit takes a block out of the middle), reference counts for
// blocks shared through prefix hits, and the prefix cache, a hash map from
// block hash to the cached block(s).
//
// It follows vLLM v1's BlockPool/FreeKVCacheBlockQueue:
//   - block 0 is the null block and is never handed out;
//   - initially the free queue holds blocks 1..n-1 in order;
//   - a freed block whose hash is set stays in the prefix cache while it sits
//     in the free queue (an evictable cached block); it is evicted (its hash
//     dropped) only when the allocator pops it from the head;
//   - a prefix hit on a block with ref count 0 removes it from the free queue
//     ("touch");
//   - identical blocks are not de-duplicated: two blocks may carry the same
//     hash (computed concurrently by two requests); a lookup returns the one
//     cached first.
//
// Two kinds of block identity share this machinery. A shared block (a
// leading full prompt block with a caller-supplied chain hash) is indexed in
// the hash map. A unique block (any other full block: content only its own
// request has) can only ever be hit by that request, after a preemption; it
// is registered when the request is preempted (Scheduler.registerOwn), not
// when it fills, and indexed in the request's own slice (reqState.own, by
// block index) instead of the map, which keeps the hot path free of map
// operations. Its entries are dropped when the request finishes (nobody can
// hit them any more; the blocks stay in the free queue in the same LRU
// position). The blocks in the free queue, the only ones eviction and
// lookups see, are therefore cached exactly as if every full block were
// registered when it filled.
//
// All state lives in flat slices and bitsets indexed by block id; the only
// map is the hash index, which is used for lookups and never iterated for
// output.
type blockPool struct {
	n       int // blocks including the null block
	caching bool

	// q and m hold one record per block. q is what allocating and freeing
	// touch; m is the prefix-cache identity, touched only for cached blocks.
	q []blockState
	m []blockMeta
	// The free queue is the entries [head, tail) of fifo, oldest first. A
	// block taken out of the middle (a prefix hit) leaves a tombstone
	// (noBlock) behind. vLLM links the queue; an array is read in order, so
	// popping blocks is not a chain of cache misses, and with the two flags
	// below in bitsets (7 KB for 56K blocks) popping reads nothing at the
	// block's own record. Positions grow without wrapping; the live entries
	// move to the front when the array fills.
	fifo       []int32
	head, tail int32
	inFree     bitset // in the free queue
	hashed     bitset // in the prefix cache (shared or unique)
	numFree    int
	numEvict   int // blocks in the free queue that are still in the prefix cache

	cache map[uint64]int32 // shared hash -> first cached block with that hash
	// chainHead marks the blocks the cache map points at: uncaching a
	// head without duplicates is one map operation (a delete), not a
	// lookup and a delete. The map is the simulator's hottest memory, and
	// with many engines (a cluster) its cache misses dominate.
	chainHead bitset

	// Requests owning unique cached blocks, by slot (slot 0 unused). Block
	// records name their owner by slot so that they hold no pointers: the
	// garbage collector never scans them and stores need no write barrier.
	slots     []*reqState
	freeSlots []int32
}

type blockState struct {
	pos int32 // index in fifo while in the free queue
	ref int32
}

type bitset []uint64

func newBitset(n int) bitset    { return make(bitset, (n+63)/64) }
func (s bitset) has(i int) bool { return s[i>>6]&(1<<(i&63)) != 0 }
func (s bitset) set(i int)      { s[i>>6] |= 1 << (i & 63) }
func (s bitset) unset(i int)    { s[i>>6] &^= 1 << (i & 63) }

type blockMeta struct {
	dupNext int32  // next block with the same identity (insertion order), -1 at the end
	ownIdx  int32  // unique blocks: the block index within owner
	hash    uint64 // shared blocks: the chain hash
	owner   int32  // unique blocks: slot of the request whose own[] indexes it (0 = none)
}

const noBlock = -1

func newBlockPool(n int, caching bool) *blockPool {
	p := &blockPool{
		n:       n,
		caching: caching,
		m:       make([]blockMeta, n),
		q:       make([]blockState, n),
		fifo:    make([]int32, 2*n),
		inFree:  newBitset(n),
		hashed:  newBitset(n),
		slots:   make([]*reqState, 1),
	}
	if caching {
		p.cache = make(map[uint64]int32)
		p.chainHead = newBitset(n)
	}
	for b := range p.m {
		p.m[b].dupNext = noBlock
	}
	for b := 1; b < n; b++ {
		p.pushBack(b)
	}
	p.q[0].ref = 1 // the null block is permanently in use and never counted
	return p
}

// usable is the number of blocks requests may hold (all but the null block).
func (p *blockPool) usable() int { return p.n - 1 }

// used is the number of blocks with a positive reference count.
func (p *blockPool) used() int { return p.usable() - p.numFree }

func (p *blockPool) pushBack(b int) {
	if int(p.tail) == len(p.fifo) {
		p.compact()
	}
	p.fifo[p.tail] = int32(b)
	p.q[b].pos = p.tail
	p.tail++
	p.inFree.set(b)
	p.numFree++
	if p.hashed.has(b) {
		p.numEvict++
	}
}

// compact moves the live entries of the free queue to the front of fifo.
// The queue holds at most n blocks in an array of 2n, so this runs at most
// once every n pushes.
func (p *blockPool) compact() {
	live := int32(0)
	for i := p.head; i < p.tail; i++ {
		if b := p.fifo[i]; b != noBlock {
			p.fifo[live] = b
			p.q[b].pos = live
			live++
		}
	}
	p.head, p.tail = 0, live
}

// unlink takes b, queued at fifo[pos], out of the free queue, leaving a
// tombstone there. Callers that know pos (the head) need not read b's
// record for it.
func (p *blockPool) unlink(b int, pos int32) {
	p.fifo[pos] = noBlock
	p.inFree.unset(b)
	p.numFree--
	if p.hashed.has(b) {
		p.numEvict--
	}
}

// allocate pops k blocks from the head of the free queue, evicting their
// cached hashes, and appends them (ref count 1) to dst. The caller checks
// k <= numFree first.
func (p *blockPool) allocate(k int, dst []int32) []int32 {
	for i := 0; i < k; i++ {
		for p.head < p.tail && p.fifo[p.head] == noBlock {
			p.head++
		}
		if p.head == p.tail {
			panic("sched: block pool exhausted (caller must check numFree)")
		}
		b := int(p.fifo[p.head])
		p.unlink(b, p.head)
		p.head++
		if p.hashed.has(b) {
			p.uncache(b)
		}
		p.q[b].ref = 1 // a store: b's record is not read here
		dst = append(dst, int32(b))
	}
	return dst
}

// touch takes a reference on a prefix-hit block, removing it from the free
// queue if nobody held it.
func (p *blockPool) touch(b int) {
	if p.q[b].ref == 0 {
		p.unlink(b, p.q[b].pos)
	}
	p.q[b].ref++
}

// free drops one reference on each block, in reverse order so that a
// request's tail blocks enter the free queue first and are evicted first.
func (p *blockPool) free(blocks []int32) {
	for i := len(blocks) - 1; i >= 0; i-- {
		b := int(blocks[i])
		p.q[b].ref--
		if p.q[b].ref < 0 {
			panic("sched: block freed twice")
		}
		if p.q[b].ref == 0 {
			p.pushBack(b)
		}
	}
}

// lookup returns the first cached block carrying hash h.
func (p *blockPool) lookup(h uint64) (int, bool) {
	if !p.caching {
		return 0, false
	}
	b, ok := p.cache[h]
	return int(b), ok
}

// lookupUnique returns the first cached block of st's unique block idx.
func (p *blockPool) lookupUnique(st *reqState, idx int) (int, bool) {
	if idx < len(st.own) && st.own[idx] != noBlock {
		return int(st.own[idx]), true
	}
	return 0, false
}

// appendChain appends b to the chain starting at head (head != noBlock).
func (p *blockPool) appendChain(head int32, b int) {
	for p.m[head].dupNext != noBlock {
		head = p.m[head].dupNext
	}
	p.m[head].dupNext = int32(b)
}

// removeChain unlinks b from the chain whose head is *head.
func (p *blockPool) removeChain(head *int32, b int) {
	if int(*head) == b {
		*head = p.m[b].dupNext
		return
	}
	for c := *head; c != noBlock; c = p.m[c].dupNext {
		if int(p.m[c].dupNext) == b {
			p.m[c].dupNext = p.m[b].dupNext
			return
		}
	}
}

// insert registers block b (held by a request, so not in the free queue)
// under shared hash h.
func (p *blockPool) insert(b int, h uint64) {
	p.m[b].hash = h
	p.hashed.set(b)
	p.m[b].dupNext = noBlock
	if head, ok := p.cache[h]; ok {
		p.appendChain(head, b)
	} else {
		p.cache[h] = int32(b)
		p.chainHead.set(b)
	}
}

// insertUnique registers block b as st's unique block idx.
func (p *blockPool) insertUnique(b int, st *reqState, idx int) {
	p.hashed.set(b)
	p.m[b].dupNext = noBlock
	if st.slot == 0 {
		if n := len(p.freeSlots); n > 0 {
			st.slot = p.freeSlots[n-1]
			p.freeSlots = p.freeSlots[:n-1]
		} else {
			st.slot = int32(len(p.slots))
			p.slots = append(p.slots, nil)
		}
		p.slots[st.slot] = st
	}
	p.m[b].owner = st.slot
	p.m[b].ownIdx = int32(idx)
	if len(st.own) <= idx {
		if cap(st.own) <= idx {
			own := make([]int32, len(st.own), max(2*cap(st.own), idx+1, cap(st.blocks)))
			// (own normally comes pre-sized from the scheduler's spare slices)
			copy(own, st.own)
			st.own = own
		}
		for len(st.own) <= idx {
			st.own = append(st.own, noBlock)
		}
	}
	if st.own[idx] == noBlock {
		st.own[idx] = int32(b)
	} else {
		p.appendChain(st.own[idx], b)
	}
}

// uncache drops block b from the prefix cache.
func (p *blockPool) uncache(b int) {
	if slot := p.m[b].owner; slot != 0 {
		st := p.slots[slot]
		p.removeChain(&st.own[p.m[b].ownIdx], b)
		p.m[b].owner = 0
	} else if h := p.m[b].hash; p.chainHead.has(b) {
		p.chainHead.unset(b)
		if next := p.m[b].dupNext; next == noBlock {
			delete(p.cache, h)
		} else {
			p.cache[h] = next
			p.chainHead.set(int(next))
		}
	} else {
		head := p.cache[h] // b is further down the chain: the head stays
		p.removeChain(&head, b)
	}
	if p.inFree.has(b) {
		p.numEvict--
	}
	p.hashed.unset(b)
	p.m[b].hash = 0
	p.m[b].dupNext = noBlock
}

// dropUnique uncaches every unique block of st (st is finishing: nobody can
// hit them any more).
func (p *blockPool) dropUnique(st *reqState) {
	for _, head := range st.own {
		for c := head; c != noBlock; {
			next := p.m[c].dupNext
			p.uncache(int(c))
			c = next
		}
	}
	st.own = st.own[:0]
	if st.slot != 0 {
		p.slots[st.slot] = nil
		p.freeSlots = append(p.freeSlots, st.slot)
		st.slot = 0
	}
}

// ownerOf returns the request owning unique block b, or nil.
func (p *blockPool) ownerOf(b int) *reqState { return p.slots[p.m[b].owner] }

// numCachedBlocks is the number of blocks registered in the prefix cache
// (held or evictable).
func (p *blockPool) numCachedBlocks() int {
	n := 0
	for b := 1; b < p.n; b++ {
		if p.hashed.has(b) {
			n++
		}
	}
	return n
}
