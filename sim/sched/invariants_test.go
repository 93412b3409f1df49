//go:build invariants

package sched

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Under the invariants tag a deliberately broken scheduler panics at its
// next check, naming what broke: the per-call checks on a pool too large
// for the audit to run at that call, the audit (CheckInvariants) on a
// small one.
func TestInvariantsTrip(t *testing.T) {
	const small, large = 65, 8*auditBlocks + 1 // audit every call; every 8th
	for _, tc := range []struct {
		name   string
		blocks int
		breaks func(s *Scheduler, out *Output)
		call   string // the call after which the check runs
		want   string
	}{
		{name: "evictable beyond free", blocks: large, breaks: func(s *Scheduler, _ *Output) { s.pool.numEvict = s.pool.numFree + 1 },
			call: "Update", want: "KV blocks: 509 evictable, 508 free, 512 usable"},
		{name: "running and waiting", blocks: large, breaks: func(s *Scheduler, _ *Output) { s.waiting.pushBack(s.running[0]) },
			call: "Update", want: "2 live requests, 2 running + 1 waiting"},
		{name: "blocks short of computed tokens", blocks: large, breaks: func(s *Scheduler, _ *Output) { s.running[1].blocks = s.running[1].blocks[:1] },
			call: "Update", want: "running 1: status running, 1 blocks for 20 computed tokens"},
		{name: "token budget", blocks: large, breaks: func(s *Scheduler, _ *Output) { s.cfg.MaxNumBatchedTokens = 8 },
			call: "Schedule", want: "40 tokens scheduled > max_num_batched_tokens 8"},
		{name: "output miscounted", blocks: large, breaks: func(_ *Scheduler, out *Output) { out.TotalScheduledTokens++ },
			call: "Schedule", want: "total_scheduled_tokens 41, its requests' sum 40"},
		{name: "audit: ref count", blocks: small, breaks: func(s *Scheduler, _ *Output) { s.pool.q[s.running[0].blocks[0]].ref++ },
			call: "Update", want: "ref 2 but held by 1 tables"},
		{name: "audit: free queue", blocks: small, breaks: func(s *Scheduler, _ *Output) { s.pool.numFree-- },
			call: "Update", want: "free queue has 60 blocks, numFree 59"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.NumGPUBlocks = tc.blocks
			s, err := New(cfg)
			require.NoError(t, err)
			for i := range 2 {
				require.NoError(t, s.Add(&Request{ID: fmt.Sprint(i), PromptTokens: 20, MaxOutputTokens: 10}))
			}
			out := s.Schedule() // a consistent scheduler passes its checks
			require.Equal(t, 2, s.NumRunning())
			tc.breaks(s, out)
			var msg any
			func() {
				defer func() { msg = recover() }()
				if tc.call == "Update" {
					s.Update(out)
				} else {
					s.checkStep(tc.call, out)
				}
			}()
			require.NotNil(t, msg, "the broken state passed")
			assert.Contains(t, msg, "invariant violated: sched: after "+tc.call+" of step 0: ")
			assert.Contains(t, msg, tc.want)
		})
	}
}
