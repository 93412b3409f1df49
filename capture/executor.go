package capture

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/steplab/steplab/sim"
	"github.com/steplab/steplab/sim/sched"
)

// WallClock is the engine clock of a capture: nanoseconds since the run's
// start on Go's monotonic clock. Host work takes the time it takes (Spend
// does nothing); waiting for a future arrival sleeps.
type WallClock struct{ start time.Time }

// NewWallClock starts the run's clock now.
func NewWallClock() *WallClock { return &WallClock{start: time.Now()} }

// Now implements sim.Clock.
func (c *WallClock) Now() int64 { return int64(time.Since(c.start)) }

// Spend implements sim.Clock: real work already took real time.
func (c *WallClock) Spend(int64) {}

// AdvanceTo implements sim.Clock by sleeping until t.
func (c *WallClock) AdvanceTo(t int64) {
	if d := t - c.Now(); d > 0 {
		time.Sleep(time.Duration(d))
	}
}

// Since converts a wall time to the run's clock.
func (c *WallClock) Since(t time.Time) int64 { return int64(t.Sub(c.start)) }

// GPUExecutor is the real executor: it serializes each scheduler output as
// the worker protocol's step message (mirroring vLLM's SchedulerOutput, so
// the bytes are real), ships it to the worker process and reports the
// output's arrival time and the worker's own timings.
type GPUExecutor struct {
	proc  *Process
	clock *WallClock
	vocab int
	seed  uint64

	// tokens holds each live request's known token ids: its prompt and the
	// tokens the worker sampled, so a resumed request ships them all.
	tokens  map[string][]int32
	pending []int64 // step ids in flight, oldest first
	// OnOutput, when set, sees each output (tests, progress).
	OnOutput func(*OutputMsg)
}

// NewGPUExecutor drives a started and initialised worker.
func NewGPUExecutor(p *Process, clock *WallClock, vocab int, seed uint64) *GPUExecutor {
	return &GPUExecutor{proc: p, clock: clock, vocab: vocab, seed: seed, tokens: map[string][]int32{}}
}

// promptTokens returns deterministic pseudo-random token ids for a request
// (seeded by its id), so a capture ships real-sized, reproducible prompts.
func (x *GPUExecutor) promptTokens(id string, n int) []int32 {
	h := fnv.New64a()
	h.Write([]byte(id))
	s := h.Sum64() ^ x.seed
	out := make([]int32, n)
	for i := range out {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		out[i] = int32(s % uint64(x.vocab))
	}
	return out
}

var greedy = SamplingParams{Temperature: 0, TopP: 1, TopK: -1}

// Submit implements sim.Executor.
func (x *GPUExecutor) Submit(out *sched.Output, now int64) (sim.Payload, error) {
	var p sim.Payload
	// Encode the two request lists separately so their bytes are known,
	// then the whole step map around them.
	var newBuf bytes.Buffer
	enc := msgpack.NewEncoder(&newBuf)
	if err := enc.EncodeArrayLen(len(out.NewReqs)); err != nil {
		return p, err
	}
	perReq := make([]int64, 0, out.NumScheduledReqs())
	for i := range out.NewReqs {
		sr := &out.NewReqs[i]
		toks := x.tokens[sr.Req.ID]
		if toks == nil || !sr.Resumed {
			toks = x.promptTokens(sr.Req.ID, sr.Req.PromptTokens)
		}
		if len(toks) < sr.NumTokens {
			return p, fmt.Errorf("request %s: scheduler knows %d tokens, executor %d", sr.Req.ID, sr.NumTokens, len(toks))
		}
		toks = toks[:sr.NumTokens]
		x.tokens[sr.Req.ID] = toks
		before := newBuf.Len()
		sp := greedy
		sp.MaxTokens = sr.Req.MaxOutputTokens
		if err := enc.Encode(&NewRequestData{ReqID: sr.Req.ID, PromptTokenIDs: toks, BlockIDs: sr.BlockIDs,
			NumComputedTokens: sr.NumComputedTokens, SamplingParams: sp}); err != nil {
			return p, err
		}
		perReq = append(perReq, int64(newBuf.Len()-before))
	}
	cached := CachedRequestData{ResumedReqIDs: []string{}}
	for i := range out.CachedReqs {
		sr := &out.CachedReqs[i]
		cached.ReqIDs = append(cached.ReqIDs, sr.Req.ID)
		var nb []int
		if len(sr.NewBlockIDs) > 0 {
			nb = sr.NewBlockIDs
		}
		cached.NewBlockIDs = append(cached.NewBlockIDs, nb)
		cached.NumComputedTokens = append(cached.NumComputedTokens, sr.NumComputedTokens)
		cached.NumOutputTokens = append(cached.NumOutputTokens, sr.NumOutputTokens)
	}
	cachedBody, err := msgpack.Marshal(&cached)
	if err != nil {
		return p, err
	}
	for i := range out.CachedReqs {
		// Per-request share of the parallel lists: id, block ids and counts.
		sr := &out.CachedReqs[i]
		perReq = append(perReq, int64(len(sr.Req.ID)+1+2*len(sr.NewBlockIDs)+1+3+3))
	}
	sched := make(map[string]int, out.NumScheduledReqs())
	for i := range out.NewReqs {
		sched[out.NewReqs[i].Req.ID] = out.NewReqs[i].NumScheduledTokens
	}
	for i := range out.CachedReqs {
		sched[out.CachedReqs[i].Req.ID] = out.CachedReqs[i].NumScheduledTokens
	}
	for _, id := range out.FinishedIDs {
		delete(x.tokens, id)
	}
	var body bytes.Buffer
	e := msgpack.NewEncoder(&body)
	e.SetSortMapKeys(true)
	kv := []struct {
		k string
		v any
	}{
		{"type", "step"},
		{"step_id", out.StepID},
		{"scheduled_new_reqs", msgpack.RawMessage(newBuf.Bytes())},
		{"scheduled_cached_reqs", msgpack.RawMessage(cachedBody)},
		{"num_scheduled_tokens", sched},
		{"total_num_scheduled_tokens", out.TotalScheduledTokens},
		{"finished_req_ids", nonNil(out.FinishedIDs)},
		{"preempted_req_ids", nonNil(out.PreemptedIDs)},
	}
	if err := e.EncodeMapLen(len(kv)); err != nil {
		return p, err
	}
	for _, f := range kv {
		if err := e.EncodeString(f.k); err != nil {
			return p, err
		}
		if err := e.Encode(f.v); err != nil {
			return p, err
		}
	}
	framed := withHeader(body.Bytes())
	if err := x.proc.Send(framed); err != nil {
		return p, err
	}
	x.pending = append(x.pending, out.StepID)
	p = sim.Payload{Total: int64(len(framed)), New: int64(newBuf.Len()), Cached: int64(len(cachedBody)), PerReq: perReq}
	return p, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Result implements sim.Executor.
func (x *GPUExecutor) Result(stepID int64, now int64, block bool) (sim.StepResult, bool, int64, error) {
	if len(x.pending) == 0 || x.pending[0] != stepID {
		return sim.StepResult{}, false, -1, fmt.Errorf("capture: step %d is not the oldest in flight", stepID)
	}
	var msg OutputMsg
	var at time.Time
	var err error
	if block {
		at, err = x.proc.Recv(&msg, x.proc.opts.StepTimeout)
	} else {
		var got bool
		at, got, err = x.proc.TryRecv(&msg)
		if err == nil && !got {
			return sim.StepResult{}, false, -1, nil
		}
	}
	if err != nil {
		return sim.StepResult{}, false, -1, fmt.Errorf("step %d: %w", stepID, err)
	}
	if msg.Type != "output" || msg.StepID != stepID {
		return sim.StepResult{}, false, -1, fmt.Errorf("step %d: worker answered %q for step %d", stepID, msg.Type, msg.StepID)
	}
	x.pending = x.pending[1:]
	for id, tok := range msg.SampledTokenIDs {
		if tok >= 0 {
			if t, ok := x.tokens[id]; ok {
				x.tokens[id] = append(t, int32(tok))
			}
		}
	}
	if x.OnOutput != nil {
		x.OnOutput(&msg)
	}
	tm := msg.Timings
	return sim.StepResult{StepID: stepID, TOutput: x.clock.Since(at), GPUTimeNs: tm.DeviceNs, HostPrepNs: tm.PrepNs,
		WorkerRecvNs: tm.RecvNs, SampleNs: tm.SampleNs, PaddedBatch: tm.Graph}, true, -1, nil
}

// Close implements sim.Executor: it stops the worker.
func (x *GPUExecutor) Close() error { return x.proc.Shutdown(30 * time.Second) }
