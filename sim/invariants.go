package sim

import (
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/internal/invariants"
)

// checkStep panics, under the invariants build tag, when a step the engine
// records breaks what every step must hold: step ids increasing, the
// timing windows in order, the step within the engine's limits, and its
// step_requests rows naming it and adding up to its tokens.
func (e *Engine) checkStep(s *datasets.Step, rows []datasets.StepRequest) {
	c := &e.cfg.Sched
	sum := int64(0)
	for i := range rows {
		if rows[i].StepID != s.StepID {
			invariants.Failf("engine: step %d's step_requests row %d names step %d", s.StepID, i, rows[i].StepID)
		}
		sum += rows[i].NumScheduledTokens
	}
	switch {
	case s.StepID <= e.lastStepID:
		invariants.Failf("engine: step %d recorded after step %d", s.StepID, e.lastStepID)
	case !(s.TScheduleStart <= s.TScheduleEnd && s.TScheduleEnd <= s.TDispatch && s.TDispatch <= s.TOutput && s.TOutput <= s.TUpdateEnd):
		invariants.Failf("engine: step %d: timings out of order: schedule %d-%d, dispatch %d, output %d, update end %d",
			s.StepID, s.TScheduleStart, s.TScheduleEnd, s.TDispatch, s.TOutput, s.TUpdateEnd)
	case s.TotalScheduledTokens > int64(c.MaxNumBatchedTokens) || int(s.NumNewReqs+s.NumCachedReqs) > c.MaxNumSeqs || s.KVBlocksUsed > s.KVBlocksTotal:
		invariants.Failf("engine: step %d: %d tokens, %d requests, %d of %d KV blocks: beyond max_num_batched_tokens %d or max_num_seqs %d",
			s.StepID, s.TotalScheduledTokens, s.NumNewReqs+s.NumCachedReqs, s.KVBlocksUsed, s.KVBlocksTotal, c.MaxNumBatchedTokens, c.MaxNumSeqs)
	case len(rows) != int(s.NumNewReqs+s.NumCachedReqs) || sum != s.TotalScheduledTokens:
		invariants.Failf("engine: step %d: %d step_requests rows with %d tokens for %d requests with %d tokens",
			s.StepID, len(rows), sum, s.NumNewReqs+s.NumCachedReqs, s.TotalScheduledTokens)
	}
	e.lastStepID = s.StepID
}

// checkLive panics, under the invariants build tag, when the engine and
// its scheduler disagree on the live requests after a step's update.
func (e *Engine) checkLive(stepID int64) {
	if n, m := len(e.reqs), e.sch.NumRunning()+e.sch.NumWaiting(); n != m {
		invariants.Failf("engine: after step %d: %d live requests, the scheduler has %d running + waiting", stepID, n, m)
	}
}
