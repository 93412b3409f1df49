package sched

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/internal/invariants"
)

func testConfig() Config {
	return Config{MaxNumSeqs: 8, MaxNumBatchedTokens: 64, BlockSize: 16, NumGPUBlocks: 65,
		MaxModelLen: 512, ChunkedPrefill: true, PrefixCaching: true}
}

func TestDefaultConfigValid(t *testing.T) {
	require.NoError(t, DefaultConfig().Validate())
	_, err := New(Config{})
	require.Error(t, err)
}

func TestUpdateOutOfOrderPanics(t *testing.T) {
	s, err := New(testConfig())
	require.NoError(t, err)
	require.NoError(t, s.Add(&Request{ID: "a", PromptTokens: 10, MaxOutputTokens: 5}))
	o0 := s.Schedule()
	o1 := s.Schedule()
	require.Equal(t, int64(0), o0.StepID)
	require.Equal(t, int64(1), o1.StepID)
	require.Equal(t, 2, s.InFlight())
	assert.Panics(t, func() { s.Update(o1) })
}

func TestEmptyOutput(t *testing.T) {
	s, _ := New(testConfig())
	o := s.Schedule()
	require.True(t, o.Empty())
	require.Equal(t, int64(-1), o.StepID)
	res := s.Update(o) // allowed, recycles
	require.Zero(t, res.Sampled)
	require.Equal(t, 0, s.InFlight())
}

func TestAbortAndReuseID(t *testing.T) {
	s, _ := New(testConfig())
	require.False(t, s.Abort("nope"))
	require.NoError(t, s.Add(&Request{ID: "a", PromptTokens: 100, MaxOutputTokens: 5}))
	err := s.Add(&Request{ID: "a", PromptTokens: 10, MaxOutputTokens: 5})
	require.True(t, errors.Is(err, ErrRejected))
	require.True(t, s.Abort("a")) // while waiting
	require.False(t, s.HasUnfinished())
	o := s.Schedule()
	require.Equal(t, []string{"a"}, o.FinishedIDs)

	// The id is free again; abort while running frees the blocks.
	require.NoError(t, s.Add(&Request{ID: "a", PromptTokens: 100, MaxOutputTokens: 5}))
	o = s.Schedule()
	require.Len(t, o.NewReqs, 1)
	require.Equal(t, 4, s.KVBlocksUsed())
	require.True(t, s.Abort("a"))
	require.Equal(t, 0, s.KVBlocksUsed())
	res := s.Update(o) // its in-flight work is discarded
	require.Zero(t, res.Sampled)
	require.NoError(t, s.CheckInvariants())
}

// Steady decode allocates nothing: outputs, slices and the update result are
// recycled.
func TestSteadyStateAllocs(t *testing.T) {
	if invariants.Enabled {
		t.Skip("the invariants build's checks allocate")
	}
	for _, async := range []bool{false, true} {
		cfg := testConfig()
		cfg.MaxNumSeqs = 32
		cfg.NumGPUBlocks = 32*40 + 1
		cfg.MaxNumBatchedTokens = 4096
		s, _ := New(cfg)
		for i := 0; i < 32; i++ {
			require.NoError(t, s.Add(&Request{ID: fmt.Sprint(i), PromptTokens: 100, MaxOutputTokens: 400}))
		}
		var prev *Output
		step := func() {
			o := s.Schedule()
			if !async {
				s.Update(o)
				return
			}
			if prev != nil {
				s.Update(prev)
			}
			prev = o
		}
		for i := 0; i < 5; i++ {
			step()
		}
		allocs := testing.AllocsPerRun(100, step)
		assert.Zero(t, allocs, "async=%v", async)
	}
}

func TestDeque(t *testing.T) {
	var q deque
	mk := func(i int) *reqState { return &reqState{r: &Request{ID: fmt.Sprint(i)}} }
	var all []*reqState
	for i := 0; i < 40; i++ {
		st := mk(i)
		all = append(all, st)
		if i%3 == 0 {
			q.pushFront(st)
		} else {
			q.pushBack(st)
		}
	}
	require.Equal(t, 40, q.len())
	require.True(t, q.remove(all[5]))
	require.False(t, q.remove(all[5]))
	var got []string
	for q.len() > 0 {
		got = append(got, q.popFront().r.ID)
	}
	var want []string
	for i := 39; i >= 0; i-- {
		if i%3 == 0 {
			want = append(want, fmt.Sprint(i))
		}
	}
	for i := 0; i < 40; i++ {
		if i%3 != 0 && i != 5 {
			want = append(want, fmt.Sprint(i))
		}
	}
	require.Equal(t, want, got)
}

func TestBlockPoolLRU(t *testing.T) {
	p := newBlockPool(6, true) // blocks 1..5
	a := p.allocate(3, nil)
	require.Equal(t, []int32{1, 2, 3}, a)
	p.insert(1, 100)
	p.insert(2, 200)
	p.free(a) // tail first: 3, 2, 1 join the queue after 4, 5
	require.Equal(t, 5, p.numFree)
	require.Equal(t, 2, p.numEvict)
	b, ok := p.lookup(200)
	require.True(t, ok)
	require.Equal(t, 2, b)
	p.touch(2) // hit: leaves the free queue
	require.Equal(t, 4, p.numFree)
	got := p.allocate(4, nil) // 4, 5, 3, then 1 (evicting hash 100)
	require.Equal(t, []int32{4, 5, 3, 1}, got)
	_, ok = p.lookup(100)
	require.False(t, ok)
	_, ok = p.lookup(200)
	require.True(t, ok)
	require.Equal(t, 0, p.numFree)
}

// CachedPrefix reports the leading blocks the next admission of a prompt
// with those hashes would hit, and reads nothing else: no block moves.
func TestCachedPrefix(t *testing.T) {
	for _, caching := range []bool{true, false} {
		cfg := testConfig()
		cfg.PrefixCaching = caching
		s, _ := New(cfg)
		a := []uint64{11, 12, 13, 14, 15}
		require.NoError(t, s.Add(&Request{ID: "a", PromptTokens: 100, MaxOutputTokens: 2, BlockHashes: a}))
		for s.HasUnfinished() {
			s.Update(s.Schedule())
		}
		b := []uint64{11, 12, 13, 99, 98}
		want := map[bool][2]int{true: {5, 3}, false: {0, 0}}[caching]
		used, evict := s.KVBlocksUsed(), s.KVBlocksEvictable()
		assert.Equal(t, want[0], s.CachedPrefix(a), "caching %v", caching)
		assert.Equal(t, want[1], s.CachedPrefix(b), "caching %v", caching)
		assert.Equal(t, 0, s.CachedPrefix(nil))
		assert.Equal(t, used, s.KVBlocksUsed())
		assert.Equal(t, evict, s.KVBlocksEvictable())
		require.NoError(t, s.Add(&Request{ID: "b", PromptTokens: 100, MaxOutputTokens: 2, BlockHashes: b}))
		o := s.Schedule()
		require.Len(t, o.NewReqs, 1)
		assert.Equal(t, want[1]*cfg.BlockSize, o.NewReqs[0].PrefixHitTokens, "the admission hits what CachedPrefix said")
		require.NoError(t, s.CheckInvariants())
	}
}
