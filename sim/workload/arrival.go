package workload

import (
	"strconv"
	"strings"

	"github.com/steplab/steplab/sim/rng"
)

// Arrival is one request entering the engine.
type Arrival struct {
	// ID is unique within a source.
	ID string
	// AtNs is the arrival time, nanoseconds since the run's start (virtual
	// clock). A source returns arrivals in non-decreasing AtNs.
	AtNs int64
	// PromptTokens is the prompt length (>= 1); OutputTokens the number of
	// tokens to generate (>= 1).
	PromptTokens, OutputTokens int
	// PrefixHashes, when present, is a hash chain over the prompt's blocks of
	// BlockSize tokens (see TraceSource.BlockSize): PrefixHashes[i] identifies
	// tokens [0, (i+1)·BlockSize) of the prompt, so two arrivals with an
	// equal PrefixHashes[i] share that whole prefix. Use EngineBlockHashes to
	// re-block to the engine's block size. Nil when the source has none.
	PrefixHashes []uint64
	// PrecomputedTokens is KV already resident for this request when it is
	// admitted (a benchmark's synthetic prefix, see Point.Arrivals): the
	// engine schedules only PromptTokens − PrecomputedTokens tokens for it.
	// Zero for ordinary traffic.
	PrecomputedTokens int
	// Warmup marks a request sent before the measured window (the first
	// WarmupRequests of a generator); reports exclude it.
	Warmup bool
}

// Source is a deterministic, pull-based stream of arrivals. Memory stays flat
// in the number of arrivals: a source holds its configuration and a cursor,
// never the whole trace (TraceSource of an unsorted table is the documented
// exception).
type Source interface {
	// Next returns the next arrival, or false when none is available now.
	// After false, Err says whether the source failed; for a source that
	// also implements Peeker, NextAt says whether it is exhausted or only
	// waiting (closed loop).
	Next() (Arrival, bool)
	// Err is the first error the source met (a read error of a trace), or nil.
	Err() error
}

// Status is what a Peeker knows about its next arrival.
type Status uint8

const (
	// Ready: the next arrival is known; NextAt returns its time.
	Ready Status = iota
	// Waiting: no arrival is known now, but one can follow a Complete call
	// (every closed-loop user is waiting for a response).
	Waiting
	// Exhausted: the source will produce no more arrivals (or failed: see Err).
	Exhausted
)

func (s Status) String() string {
	switch s {
	case Ready:
		return "ready"
	case Waiting:
		return "waiting"
	case Exhausted:
		return "exhausted"
	}
	return "status(" + strconv.Itoa(int(s)) + ")"
}

// Peeker is a Source a discrete-event engine can ask "when is your next
// arrival, given what you know now?". Every source of this package
// implements it.
//
// Engine protocol: whenever the engine's clock reaches a new time now (an
// event fired, a request completed), it calls
//
//	for {
//		t, st := src.NextAt()
//		if st != Ready || t > now { break }
//		a, _ := src.Next() // a.AtNs == t
//		admit(a)
//	}
//
// and, when st == Ready, keeps a wake-up event at t. A value returned by
// NextAt is a hint, not a promise: a Complete call on a closed loop can make
// an earlier arrival appear, so query NextAt again after every Complete.
type Peeker interface {
	Source
	// NextAt returns the time of the next arrival and Ready, or (0, Waiting),
	// or (0, Exhausted). It does not consume the arrival.
	NextAt() (atNs int64, st Status)
}

// Completer receives the engine's completions. A closed-loop source needs
// them to release its users; open-loop and trace sources accept and ignore
// them, so an engine can call Complete on any source of this package.
type Completer interface {
	// Complete tells the source that request id finished at atNs (its last
	// token was delivered). atNs must not precede the last arrival the
	// source returned; id must be a request it produced and not completed yet
	// (closed loop only: other sources ignore the call).
	Complete(id string, atNs int64) error
}

// idArena builds IDs "<prefix><n>" without one allocation per ID: digits are
// appended to a shared strings.Builder and each ID is a substring of what it
// holds. A Builder never rewrites bytes it has handed out, so the strings are
// immutable; a chunk is freed when no ID referencing it is alive.
type idArena struct {
	prefix string
	chunk  strings.Builder
}

const idChunk = 16 << 10

func (a *idArena) id(n int64) string {
	need := len(a.prefix) + 20
	if a.chunk.Cap()-a.chunk.Len() < need {
		a.chunk = strings.Builder{}
		a.chunk.Grow(max(idChunk, need))
	}
	start := a.chunk.Len()
	a.chunk.WriteString(a.prefix)
	var digits [20]byte
	a.chunk.Write(strconv.AppendInt(digits[:0], n, 10))
	return a.chunk.String()[start:]
}

// chainHashes turns a list of per-block ids (Mooncake's hash_ids) into a hash
// chain: out[i] = H(out[i-1], ids[i]). Two prompts get an equal out[i] only if
// their ids agree on blocks 0..i, which is the meaning of a prefix-cache block
// hash (vLLM hashes each block together with its parent's hash).
func chainHashes(ids []int64, dst []uint64) []uint64 {
	dst = dst[:0]
	h := uint64(0x736c2d7072656678) // "sl-prefx"
	for _, id := range ids {
		h = rng.Mix64(h ^ rng.Mix64(uint64(id)))
		dst = append(dst, h)
	}
	return dst
}

// EngineBlockHashes re-blocks a hash chain of source blocks (srcBlock tokens
// each, e.g. 512 for Mooncake) to an engine's block size. Engine block k
// covers tokens [k·engineBlock, (k+1)·engineBlock); it gets a hash only if it
// is full (ends at or before promptTokens) and covered by the chain; its hash
// is derived from the chain entry of the source block holding its last token,
// so equal engine hashes imply an equal prefix. The result is appended to
// dst[:0]. Blocks past the chain (or a partial last block) get no hash: the
// engine treats them as uncacheable.
func EngineBlockHashes(chain []uint64, srcBlock, engineBlock, promptTokens int, dst []uint64) []uint64 {
	dst = dst[:0]
	if srcBlock < 1 || engineBlock < 1 {
		return dst
	}
	covered := len(chain) * srcBlock
	limit := min(covered, promptTokens)
	for k := 0; (k+1)*engineBlock <= limit; k++ {
		end := (k + 1) * engineBlock
		src := chain[(end-1)/srcBlock]
		dst = append(dst, rng.Mix64(src^rng.Mix64(uint64(k)^0x656e67696e65)))
	}
	return dst
}
