package sim

import (
	"slices"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/features"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/internal/invariants"
	"github.com/steplab/steplab/sim/sched"
)

// Composition summarises a scheduler output the way the steps table and
// the forward-pass model see it: Batch holds the steps-table composition
// columns and Features is features.Of of them (PaddedBatch is the decode
// count until the executor pads the batch to a CUDA graph).
type Composition struct {
	Features              fpm.Features
	Batch                 features.Batch
	NumPrefill, NumDecode int
	NumResumed            int
}

// Compose computes the features of a step from the scheduler's decision.
// A request in its context phase is prefill (its scheduled tokens are a
// prompt chunk reading the tokens computed before it); otherwise it decodes
// one token reading its whole computed context.
func Compose(out *sched.Output) (c Composition) {
	c.compose(out)
	return
}

// compose is Compose into c, which is zero. The engine composes each step
// in its slot of the in-flight queue: a returned composition is copied
// there through a temporary, and the copies' wide loads of fields just
// stored stall on store forwarding.
func (c *Composition) compose(out *sched.Output) {
	add := func(sr *sched.ScheduledReq, isNew bool) {
		if sr.Resumed {
			c.NumResumed++
		}
		if isNew {
			c.Batch.New(int64(sr.NumTokens))
		}
		if sr.IsPrefill {
			c.Batch.Prefill(int64(sr.NumScheduledTokens), int64(sr.NumComputedTokens), int64(sr.Req.PromptTokens))
		} else {
			c.Batch.Decode(int64(sr.NumComputedTokens))
		}
	}
	for i := range out.NewReqs {
		add(&out.NewReqs[i], true)
	}
	for i := range out.CachedReqs {
		add(&out.CachedReqs[i], false)
	}
	c.NumPrefill, c.NumDecode = c.Batch.Requests()
	c.Features = c.Batch.Features(int32(len(out.NewReqs)))
}

// PadBatch returns the CUDA-graph capture size a decode-only batch of b
// requests runs at: the smallest capture size >= b, or b itself (eager)
// when it exceeds the largest or no sizes are captured. sizes is sorted.
func PadBatch(b int, sizes []int) int {
	for _, s := range sizes {
		if s >= b {
			return s
		}
	}
	return b
}

func (e *Engine) update(st *inflightStep, r StepResult) error {
	out := st.out
	if e.host != nil {
		e.clock.Spend(e.host.UpdateNs(out))
	}
	res := e.sch.Update(out)
	tUpdateEnd := e.clock.Now()
	c := &st.comp

	// The step is set in place field by field, as setStepRequest sets a
	// row and for the same reason: in the sink's row when it lends one,
	// else in one Step value reused across steps (sinks copy what they
	// keep).
	s := &e.step
	if e.lender != nil {
		if l := e.lender.NextStep(); l != nil {
			s = l
		}
	}
	*s = datasets.Step{}
	s.StepID, s.WorkerID, s.DPRank = out.StepID, e.cfg.WorkerID, e.cfg.DPRank
	s.Kind, s.Role, s.BenchmarkID, s.Valid = c.Features.Kind(), datasets.RoleProduction, -1, true
	s.NumNewReqs, s.NumCachedReqs, s.NumResumedReqs = int32(len(out.NewReqs)), int32(len(out.CachedReqs)), int32(c.NumResumed)
	s.NumPreempted, s.NumFinished = int32(len(out.PreemptedIDs)), int32(len(res.FinishedIDs))
	s.TotalScheduledTokens, s.CUDAGraphSize = int64(out.TotalScheduledTokens), int32(r.PaddedBatch)
	s.PayloadBytes, s.PayloadNewBytes, s.PayloadCachedBytes = st.payload.Total, st.payload.New, st.payload.Cached
	s.TScheduleStart, s.TScheduleEnd, s.TDispatch, s.TOutput, s.TUpdateEnd = st.tSchedule, st.tSchedEnd, st.tDispatch, r.TOutput, tUpdateEnd
	s.NarrowTimeNs, s.GPUTimeNs, s.HostPrepNs = r.TOutput-st.tSchedule, r.GPUTimeNs, r.HostPrepNs
	s.WorkerRecvNs, s.SampleNs, s.Overlapped = r.WorkerRecvNs, r.SampleNs, st.overlapped
	s.NumWaiting, s.NumRunning = int32(e.sch.NumWaiting()), int32(e.sch.NumRunning())
	s.KVBlocksUsed, s.KVBlocksTotal = int64(e.sch.KVBlocksUsed()), int64(e.sch.KVBlocksTotal())
	c.Batch.Fill(s) // composition columns, and the padding of a graph
	// Inter-update period (Dynamo's FPM wall_time); the first step after
	// idle has no previous update to measure from.
	if st.afterIdle || e.lastUpdateEnd < 0 {
		s.WallTimeNs = s.NarrowTimeNs
	} else {
		s.WallTimeNs = r.TOutput - e.lastUpdateEnd
	}
	e.lastUpdateEnd = tUpdateEnd

	// The step_requests rows likewise: the sink's, or one buffer reused.
	n := out.NumScheduledReqs()
	var rows []datasets.StepRequest
	if e.lender != nil {
		rows = e.lender.NextRows(n)
	}
	if rows == nil {
		e.rowBuf = slices.Grow(e.rowBuf[:0], n)[:n]
		rows = e.rowBuf
	}
	for i := range out.NewReqs {
		setStepRequest(&rows[i], out.StepID, &out.NewReqs[i], true, perReq(st.payload, i))
	}
	for k := range out.CachedReqs {
		i := len(out.NewReqs) + k
		setStepRequest(&rows[i], out.StepID, &out.CachedReqs[k], false, perReq(st.payload, i))
	}
	e.countStep(s.Kind)

	e.tokens(out, r.TOutput)
	if e.Tag != nil {
		e.Tag(s, rows, out)
	}
	if invariants.Enabled {
		e.checkStep(s, rows)
	}
	if err := e.sink.Step(s, rows); err != nil {
		return err
	}
	for _, id := range res.FinishedIDs {
		if err := e.finish(id, r.TOutput, datasets.StatusFinished); err != nil {
			return err
		}
	}
	if invariants.Enabled {
		e.checkLive(out.StepID)
	}
	return nil
}

// setStepRequest records sr's row in place, cleared and set field by
// field: a literal is built aside and copied, and the copy's wide loads of
// fields just stored stall (store forwarding) on every row.
func setStepRequest(r *datasets.StepRequest, stepID int64, sr *sched.ScheduledReq, isNew bool, bytes int64) {
	*r = datasets.StepRequest{}
	r.StepID, r.ReqID, r.IsNew, r.IsResumed, r.IsPrefill = stepID, sr.Req.ID, isNew, sr.Resumed, sr.IsPrefill
	r.NumScheduledTokens, r.NumComputedTokens = int64(sr.NumScheduledTokens), int64(sr.NumComputedTokens)
	r.PromptLen, r.PayloadBytes = int64(sr.Req.PromptTokens), bytes
}

func perReq(p Payload, i int) int64 {
	if i < len(p.PerReq) {
		return p.PerReq[i]
	}
	return 0
}

func (e *Engine) countStep(kind string) {
	e.stats.Steps++
	switch kind {
	case datasets.KindPrefill:
		e.stats.PrefillSteps++
	case datasets.KindDecode:
		e.stats.DecodeSteps++
	default:
		e.stats.MixedSteps++
	}
}

// tokens records the token each request sampled in a step: a request
// samples when the step computes up to the end of its known tokens.
func (e *Engine) tokens(out *sched.Output, tOut int64) {
	visit := func(sr *sched.ScheduledReq) {
		if !sr.Samples {
			return // a prompt chunk that does not reach the end
		}
		st := stateOf(sr)
		if st.done || st.outputs >= st.arr.OutputTokens {
			return
		}
		st.outputs++
		if st.firstToken < 0 {
			st.firstToken = tOut
			if e.OnFirstToken != nil {
				e.OnFirstToken(sr.Req.ID, tOut)
			}
		}
	}
	for k := range out.NewReqs {
		visit(&out.NewReqs[k])
	}
	for k := range out.CachedReqs {
		visit(&out.CachedReqs[k])
	}
}

func (e *Engine) finish(id string, t int64, status string) error {
	st := e.reqs[id]
	if st == nil {
		return nil
	}
	st.done = true
	delete(e.reqs, id)
	e.stats.Finished++
	return e.sink.Request(&datasets.Request{
		ReqID: id, ArrivalNs: st.arr.AtNs, PromptTokens: int64(st.arr.PromptTokens), OutputTokens: int64(st.arr.OutputTokens),
		FirstScheduledNs: st.firstScheduled, FirstTokenNs: st.firstToken, FinishNs: t,
		NumPreemptions: st.preemptions, Status: status,
	})
}

// Finish reports every request still queued or running as unfinished, at
// time t (the end of a run that stops before draining).
func (e *Engine) Finish(t int64) error {
	ids := make([]string, 0, len(e.reqs))
	for id := range e.reqs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		st := e.reqs[id]
		delete(e.reqs, id)
		if err := e.sink.Request(&datasets.Request{
			ReqID: id, ArrivalNs: st.arr.AtNs, PromptTokens: int64(st.arr.PromptTokens), OutputTokens: int64(st.arr.OutputTokens),
			FirstScheduledNs: st.firstScheduled, FirstTokenNs: st.firstToken, FinishNs: datasets.Unknown,
			NumPreemptions: st.preemptions, Status: datasets.StatusUnfinished,
		}); err != nil {
			return err
		}
	}
	// Arrivals handed to the engine that its loop has not seen yet (a run
	// stopped between the two) are unfinished too, in arrival order.
	for _, a := range e.pending[e.pendHead:] {
		if err := e.sink.Request(&datasets.Request{ReqID: a.ID, ArrivalNs: a.AtNs, PromptTokens: int64(a.PromptTokens),
			OutputTokens: int64(a.OutputTokens), FirstScheduledNs: datasets.Unknown, FirstTokenNs: datasets.Unknown,
			FinishNs: datasets.Unknown, Status: datasets.StatusUnfinished}); err != nil {
			return err
		}
	}
	e.pendHead = len(e.pending)
	return nil
}
