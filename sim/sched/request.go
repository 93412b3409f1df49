package sched

// Request is one inference request as the scheduler sees it: token counts,
// not token ids. The scheduler keeps the pointer; do not modify a Request
// after Add.
type Request struct {
	ID           string
	PromptTokens int
	// MaxOutputTokens: the request finishes after producing this many
	// tokens (no stop strings or EOS are modelled).
	MaxOutputTokens int
	// BlockHashes optionally gives the prefix identity of the prompt: one
	// chain hash per FULL prompt block (hash i covers tokens
	// [0, (i+1)*BlockSize) and so depends on every earlier block). Two
	// requests share a cached block i exactly when their BlockHashes agree
	// at i. It may cover only a leading part of the full prompt blocks;
	// blocks beyond it (and every block holding output tokens) are unique to
	// the request. nil = unique content.
	BlockHashes []uint64
	// PrecomputedTokens is KV already valid at the first admission (a
	// benchmark injection, like Dynamo's self-benchmark that admits a request
	// one token short). It must be < PromptTokens. The scheduler allocates
	// blocks for these tokens but does not compute them. It applies once:
	// after a preemption the request recomputes everything (less any prefix
	// cache hit).
	PrecomputedTokens int
	// Tag is the caller's, opaque to the scheduler: the engine keeps its
	// per-request state here so that a scheduled request leads to it
	// without a lookup.
	Tag any
}

type reqStatus uint8

const (
	statusWaiting   reqStatus = iota // never scheduled
	statusRunning                    // in the running list
	statusPreempted                  // back in waiting after a preemption
	statusFinished                   // finished or aborted; holds no blocks
)

func (s reqStatus) String() string {
	switch s {
	case statusWaiting:
		return "waiting"
	case statusRunning:
		return "running"
	case statusPreempted:
		return "preempted"
	case statusFinished:
		return "finished"
	}
	return "?"
}

// reqState is the scheduler's bookkeeping for one live request.
type reqState struct {
	r      *Request
	status reqStatus

	prompt, maxOut int // copies of r.PromptTokens, r.MaxOutputTokens (saves a pointer chase per step)

	computed     int // num_computed_tokens (advanced at schedule time)
	output       int // real output tokens produced so far
	placeholders int // sampled tokens scheduled but not yet reconciled by Update
	admitted     bool
	preemptions  int

	blocks    []int32 // block table
	numCached int     // leading blocks of the table registered in the prefix cache
	own       []int32 // prefix-cache index of this request's unique blocks, by block index (see blockPool)
	slot      int32   // blockPool slot while it owns unique cached blocks (0 = none)
}

// numTokens is prompt + real output tokens (vLLM request.num_tokens).
func (st *reqState) numTokens() int { return st.prompt + st.output }
