package validate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/steplab/steplab/datasets"
)

var (
	stepKinds = []string{datasets.KindPrefill, datasets.KindDecode, datasets.KindMixed}
	stepRoles = []string{datasets.RoleProduction, datasets.RoleMeasured, datasets.RoleScaffolding}
)

// workerKey is one engine's steps; in a partitioned table, one partition's
// (a partitioned write keeps the row order within a partition only).
type workerKey struct {
	worker    string
	dp        int32
	partition string
}

type prevStep struct {
	stepID     int64
	tUpdateEnd int64
}

// srRow is one buffered step_requests row of the current group.
type srRow struct {
	datasets.StepRequest
	row  int64
	part string
}

type stepsChecker struct {
	*checker
	prev map[workerKey]prevStep
	// partition is the PartitionDir of the part partOf, the last one read.
	partOf, partition string

	sr        *stream[datasets.StepRequest]
	pending   *srRow // lookahead: first row of the next group
	group     []srRow
	hasSR     bool
	resumedOK bool // is_resumed present

	globalOrder bool // steps.step_id non-decreasing across the table so far
	lastStepID  int64
	seenStep    bool
	// exactPayload: the source's per-request payload adds up to the
	// step's new and cached bytes (exactPayloadSources).
	exactPayload bool
	// inFlight: req_ids of a partial dataset's step_requests that its
	// requests table lacks, warned about once each.
	inFlight map[string]bool
}

func (c *checker) checkSteps() {
	hasSteps := c.readable[datasets.TableSteps]
	hasSR := c.readable[datasets.TableStepRequests]
	if !hasSteps && !hasSR {
		return
	}
	sc := &stepsChecker{checker: c, prev: map[workerKey]prevStep{}, globalOrder: true}
	sc.exactPayload = c.d.Manifest != nil && contains(exactPayloadSources, c.d.Manifest.Source.Kind)
	join := hasSteps && hasSR
	if join && (partitioned(c.parts[datasets.TableSteps]) || partitioned(c.parts[datasets.TableStepRequests])) {
		c.warnf(datasets.TableStepRequests, -1, "", "step_id", "partitioned tables keep their row order within a partition only: step_requests not joined with steps (composition counts not checked)")
		join = false
	}
	if hasSR {
		sc.hasSR = true
		sc.resumedOK = !c.defaulted[datasets.TableStepRequests]["is_resumed"]
		sc.sr = newStream[datasets.StepRequest](c.d.Dir, c.parts[datasets.TableStepRequests])
		defer sc.sr.Close()
		sc.advanceSR()
	}
	if hasSteps {
		const T = datasets.TableSteps
		s := newStream[datasets.Step](c.d.Dir, c.parts[T])
		defer s.Close()
		next := func() (*datasets.Step, int64, string) { r := s.Next(); return r, s.row, s.part }
		for st, row, part := next(); st != nil; st, row, part = next() {
			c.r.RowsChecked[T]++
			sc.checkStepRow(st, row, part)
			if join && sc.hasSR {
				sc.join(st, row, part)
			}
		}
		if s.err != nil {
			c.readErr(T, s.next, s.errPart, s.err)
			return // the join cannot go on meaningfully
		}
	}
	if sc.hasSR {
		// Whatever step_requests rows remain belong to no step (or steps is
		// absent: check the rows alone).
		for sc.pending != nil {
			p := sc.pending
			sc.checkSRRow(&p.StepRequest, p.row, p.part)
			if join {
				sc.orphan(p)
			}
			sc.advanceSR()
		}
		sc.srErr()
	}
}

// partitioned reports whether a table's parts lie in key=value folders.
func partitioned(parts []string) bool {
	return slices.ContainsFunc(parts, func(p string) bool { return datasets.PartitionDir(p) != "" })
}

func (sc *stepsChecker) srErr() {
	if sc.sr.err != nil {
		sc.readErr(datasets.TableStepRequests, sc.sr.next, sc.sr.errPart, sc.sr.err)
		sc.hasSR = false
	}
}

// advanceSR moves the lookahead to the next step_requests row.
func (sc *stepsChecker) advanceSR() {
	r, row, part := sc.sr.Next(), sc.sr.row, sc.sr.part
	if r == nil {
		sc.pending = nil
		return
	}
	sc.c().r.RowsChecked[datasets.TableStepRequests]++
	sc.pending = &srRow{StepRequest: *r, row: row, part: part}
}

func (sc *stepsChecker) c() *checker { return sc.checker }

func (sc *stepsChecker) orphan(p *srRow) {
	sc.errorf(datasets.TableStepRequests, p.row, p.part, "step_id",
		"step_id %d matches no step (no such step, or step_requests not in the order of steps)", p.StepID)
}

// join collects the step_requests rows of step st and checks the
// composition counts.
func (sc *stepsChecker) join(st *datasets.Step, row int64, part string) {
	if sc.seenStep && st.StepID < sc.lastStepID {
		sc.globalOrder = false
	}
	sc.seenStep, sc.lastStepID = true, st.StepID
	// Skip orphan groups that fell behind (only sound while step ids are
	// globally ordered).
	for sc.globalOrder && sc.pending != nil && sc.pending.StepID < st.StepID {
		p := sc.pending
		sc.checkSRRow(&p.StepRequest, p.row, p.part)
		sc.orphan(p)
		sc.advanceSR()
	}
	sc.group = sc.group[:0]
	for sc.pending != nil && sc.pending.StepID == st.StepID {
		sc.group = append(sc.group, *sc.pending)
		sc.advanceSR()
	}
	sc.srErr()
	seen := make(map[string]bool, len(sc.group))
	var nNew, nResumed, nPrefill, nDecode int64
	var tokens, prefillTokens, payload int64
	payloadKnown := true
	for i := range sc.group {
		g := &sc.group[i]
		sc.checkSRRow(&g.StepRequest, g.row, g.part)
		payload += g.PayloadBytes
		payloadKnown = payloadKnown && known(g.PayloadBytes)
		if seen[g.ReqID] {
			sc.errorf(datasets.TableStepRequests, g.row, g.part, "req_id", "req_id %q appears twice in step %d", g.ReqID, g.StepID)
		}
		seen[g.ReqID] = true
		if g.IsNew {
			nNew++
		}
		if g.IsResumed {
			nResumed++
		}
		if g.IsPrefill {
			nPrefill++
			prefillTokens += g.NumScheduledTokens
		} else {
			nDecode++
		}
		tokens += g.NumScheduledTokens
	}
	const T = datasets.TableSteps
	n := int64(len(sc.group))
	if known(int64(st.NumNewReqs)) && known(int64(st.NumCachedReqs)) {
		if want := int64(st.NumNewReqs) + int64(st.NumCachedReqs); want != n {
			sc.errorf(T, row, part, "num_new_reqs+num_cached_reqs", "num_new_reqs %d + num_cached_reqs %d = %d, but step_requests has %d rows for step %d",
				st.NumNewReqs, st.NumCachedReqs, want, n, st.StepID)
		}
	}
	if known(int64(st.NumNewReqs)) && int64(st.NumNewReqs) != nNew {
		sc.errorf(T, row, part, "num_new_reqs", "num_new_reqs %d, but %d step_requests rows of step %d are is_new", st.NumNewReqs, nNew, st.StepID)
	}
	if sc.resumedOK && known(int64(st.NumResumedReqs)) && int64(st.NumResumedReqs) != nResumed {
		sc.errorf(T, row, part, "num_resumed_reqs", "num_resumed_reqs %d, but %d step_requests rows of step %d are is_resumed", st.NumResumedReqs, nResumed, st.StepID)
	}
	if known(int64(st.NumPrefillRequests)) && int64(st.NumPrefillRequests) != nPrefill {
		sc.errorf(T, row, part, "num_prefill_requests", "num_prefill_requests %d, but %d step_requests rows of step %d are is_prefill", st.NumPrefillRequests, nPrefill, st.StepID)
	}
	if known(int64(st.NumDecodeRequests)) && int64(st.NumDecodeRequests) != nDecode {
		sc.errorf(T, row, part, "num_decode_requests", "num_decode_requests %d, but %d step_requests rows of step %d are decode (not is_prefill)", st.NumDecodeRequests, nDecode, st.StepID)
	}
	if known(st.TotalScheduledTokens) && st.TotalScheduledTokens != tokens {
		sc.errorf(T, row, part, "total_scheduled_tokens", "total_scheduled_tokens %d, but step_requests of step %d schedule %d tokens", st.TotalScheduledTokens, st.StepID, tokens)
	}
	if known(st.SumPrefillTokens) && st.SumPrefillTokens != prefillTokens {
		sc.errorf(T, row, part, "sum_prefill_tokens", "sum_prefill_tokens %d, but the prefill rows of step %d schedule %d tokens", st.SumPrefillTokens, st.StepID, prefillTokens)
	}
	sc.checkPayloadShares(st, row, part, payloadKnown && payload > 0, payload)
}

// checkPayloadShares holds a step's payload to its requests' shares (see
// the package doc, "payload_bytes"): they never exceed payload_bytes, and
// where the source splits the step exactly they add up to
// payload_new_bytes + payload_cached_bytes. A step or step_requests
// without payload (0 or Unknown) is not checked.
func (sc *stepsChecker) checkPayloadShares(st *datasets.Step, row int64, part string, recorded bool, shares int64) {
	const T = datasets.TableSteps
	if !recorded || st.PayloadBytes <= 0 {
		return
	}
	if shares > st.PayloadBytes {
		sc.errorf(T, row, part, "payload_bytes", "payload_bytes %d, but the step_requests.payload_bytes of step %d add up to %d, more than the whole step",
			st.PayloadBytes, st.StepID, shares)
	}
	if sc.exactPayload && known(st.PayloadNewBytes) && known(st.PayloadCachedBytes) {
		if want := st.PayloadNewBytes + st.PayloadCachedBytes; shares != want {
			sc.errorf(T, row, part, "payload_new_bytes+payload_cached_bytes",
				"payload_new_bytes %d + payload_cached_bytes %d = %d, but the step_requests.payload_bytes of step %d add up to %d",
				st.PayloadNewBytes, st.PayloadCachedBytes, want, st.StepID, shares)
		}
	}
}

// exactPayloadSources are the manifest source kinds whose step_requests
// payload_bytes split the step's new and cached bytes exactly (the
// simulator prices each request and attributes the rounded totals).
var exactPayloadSources = []string{"simulate"}

func (sc *stepsChecker) checkSRRow(r *datasets.StepRequest, row int64, part string) {
	const T = datasets.TableStepRequests
	sc.nonNegInt(T, row, part, "step_id", r.StepID)
	sc.nonNegInt(T, row, part, "num_scheduled_tokens", r.NumScheduledTokens)
	sc.nonNegInt(T, row, part, "num_computed_tokens", r.NumComputedTokens)
	sc.nonNegInt(T, row, part, "prompt_len", r.PromptLen)
	sc.nonNegInt(T, row, part, "payload_bytes", r.PayloadBytes)
	if r.ReqID == "" {
		sc.errorf(T, row, part, "req_id", "empty req_id")
	} else if sc.reqIDs != nil {
		if _, ok := sc.reqIDs[r.ReqID]; !ok {
			sc.missingRequest(r.ReqID, row, part)
		}
	}
}

// missingRequest reports a step_requests row whose request the requests
// table lacks: an error, except in a partial dataset, where the request
// was in flight when the writer stopped (a request's row is written when
// it ends) and is named once as a warning.
func (sc *stepsChecker) missingRequest(id string, row int64, part string) {
	const T = datasets.TableStepRequests
	if !sc.r.Partial {
		sc.errorf(T, row, part, "req_id", "req_id %q is not in requests", id)
		return
	}
	if sc.inFlight == nil {
		sc.inFlight = map[string]bool{}
	}
	if !sc.inFlight[id] {
		sc.inFlight[id] = true
		sc.warnf(T, row, part, "req_id", "req_id %q is not in requests: in flight when the partial dataset's writer stopped", id)
	}
}

type timeField struct {
	name string
	v    int64
}

func (sc *stepsChecker) checkStepRow(st *datasets.Step, row int64, part string) {
	const T = datasets.TableSteps
	// Non-negative ints (Unknown allowed).
	ints := []timeField{
		{"step_id", st.StepID}, {"dp_rank", int64(st.DPRank)}, {"benchmark_id", st.BenchmarkID},
		{"num_new_reqs", int64(st.NumNewReqs)}, {"num_cached_reqs", int64(st.NumCachedReqs)},
		{"num_resumed_reqs", int64(st.NumResumedReqs)}, {"num_preempted", int64(st.NumPreempted)},
		{"num_finished", int64(st.NumFinished)}, {"num_prefill_requests", int64(st.NumPrefillRequests)},
		{"sum_prefill_tokens", st.SumPrefillTokens}, {"sum_prefill_kv_tokens", st.SumPrefillKVTokens},
		{"num_decode_requests", int64(st.NumDecodeRequests)}, {"sum_decode_kv_tokens", st.SumDecodeKVTokens},
		{"total_scheduled_tokens", st.TotalScheduledTokens}, {"padded_tokens", st.PaddedTokens},
		{"payload_bytes", st.PayloadBytes}, {"payload_new_bytes", st.PayloadNewBytes}, {"payload_cached_bytes", st.PayloadCachedBytes},
		{"t_schedule_start", st.TScheduleStart}, {"t_schedule_end", st.TScheduleEnd}, {"t_dispatch", st.TDispatch},
		{"t_output", st.TOutput}, {"t_update_end", st.TUpdateEnd},
		{"wall_time_ns", st.WallTimeNs}, {"narrow_time_ns", st.NarrowTimeNs}, {"gpu_time_ns", st.GPUTimeNs},
		{"host_prep_ns", st.HostPrepNs}, {"worker_recv_ns", st.WorkerRecvNs}, {"sample_ns", st.SampleNs},
		{"num_waiting", int64(st.NumWaiting)}, {"num_running", int64(st.NumRunning)},
		{"kv_blocks_used", st.KVBlocksUsed}, {"kv_blocks_total", st.KVBlocksTotal},
	}
	for _, f := range ints {
		sc.nonNegInt(T, row, part, f.name, f.v)
	}
	sc.finiteNonNeg(T, row, part, "var_prefill_length", st.VarPrefillLength)
	sc.finiteNonNeg(T, row, part, "var_decode_kv_tokens", st.VarDecodeKVTokens)

	if !contains(stepKinds, st.Kind) {
		sc.errorf(T, row, part, "kind", "kind %q not one of %s", st.Kind, strings.Join(stepKinds, ", "))
	} else if known(int64(st.NumPrefillRequests)) && known(int64(st.NumDecodeRequests)) {
		p, d := st.NumPrefillRequests > 0, st.NumDecodeRequests > 0
		var want string
		switch {
		case p && d:
			want = datasets.KindMixed
		case p:
			want = datasets.KindPrefill
		case d:
			want = datasets.KindDecode
		}
		if want == "" {
			sc.errorf(T, row, part, "kind", "kind %q but the step has no requests (num_prefill_requests 0, num_decode_requests 0)", st.Kind)
		} else if want != st.Kind {
			sc.errorf(T, row, part, "kind", "kind %q disagrees with the composition (num_prefill_requests %d, num_decode_requests %d: %s)",
				st.Kind, st.NumPrefillRequests, st.NumDecodeRequests, want)
		}
	}
	if !contains(stepRoles, st.Role) {
		sc.errorf(T, row, part, "role", "role %q not one of %s", st.Role, strings.Join(stepRoles, ", "))
	}
	if !st.Valid && st.InvalidReason == "" {
		sc.errorf(T, row, part, "invalid_reason", "valid=false without an invalid_reason")
	}
	if known(st.KVBlocksUsed) && known(st.KVBlocksTotal) && st.KVBlocksUsed > st.KVBlocksTotal {
		sc.errorf(T, row, part, "kv_blocks_used", "kv_blocks_used %d > kv_blocks_total %d", st.KVBlocksUsed, st.KVBlocksTotal)
	}

	// Timing order, each known time against the latest known earlier one.
	times := []timeField{
		{"t_schedule_start", st.TScheduleStart}, {"t_schedule_end", st.TScheduleEnd}, {"t_dispatch", st.TDispatch},
		{"t_output", st.TOutput}, {"t_update_end", st.TUpdateEnd},
	}
	last := -1
	for i, f := range times {
		if f.v < 0 {
			continue
		}
		if last >= 0 && f.v < times[last].v {
			sc.errorf(T, row, part, f.name, "%s %d is before %s %d", f.name, f.v, times[last].name, times[last].v)
		}
		last = i
	}
	if st.NarrowTimeNs >= 0 && st.TOutput >= 0 && st.TScheduleStart >= 0 {
		if want := st.TOutput - st.TScheduleStart; st.NarrowTimeNs != want {
			sc.errorf(T, row, part, "narrow_time_ns", "narrow_time_ns %d != t_output - t_schedule_start = %d", st.NarrowTimeNs, want)
		}
	}

	// Per worker: step order and the wall-time window.
	if part != sc.partOf {
		sc.partOf, sc.partition = part, datasets.PartitionDir(part)
	}
	key := workerKey{st.WorkerID, st.DPRank, sc.partition}
	prev, hasPrev := sc.prev[key]
	if hasPrev && st.StepID <= prev.stepID {
		sc.errorf(T, row, part, "step_id", "step_id %d not after the previous step %d of worker %q dp_rank %d", st.StepID, prev.stepID, st.WorkerID, st.DPRank)
	}
	sc.checkWall(st, row, part, prev, hasPrev)
	sc.prev[key] = prevStep{stepID: st.StepID, tUpdateEnd: st.TUpdateEnd}
}

// checkWall implements Dynamo's FPM wall_time (see the package doc).
func (sc *stepsChecker) checkWall(st *datasets.Step, row int64, part string, prev prevStep, hasPrev bool) {
	const T = datasets.TableSteps
	if st.TScheduleStart < 0 {
		return
	}
	afterIdle := true
	if hasPrev {
		if prev.tUpdateEnd < 0 {
			return // cannot tell whether the engine was idle
		}
		afterIdle = prev.tUpdateEnd <= st.TScheduleStart
		if st.Overlapped && afterIdle {
			sc.errorf(T, row, part, "overlapped", "overlapped, but the previous step's t_update_end %d is not after this step's t_schedule_start %d",
				prev.tUpdateEnd, st.TScheduleStart)
		}
	}
	if st.WallTimeNs < 0 || st.TOutput < 0 {
		return
	}
	// A step scheduled while its predecessor was still in flight measures
	// the inter-update period. A step scheduled after the previous update
	// measures either: the inter-update period when the engine loop went
	// straight on, or its own narrow window when the engine had been idle;
	// the columns cannot tell the two apart, so both are accepted.
	narrow := st.TOutput - st.TScheduleStart
	if afterIdle && (!hasPrev || st.WallTimeNs == narrow) {
		if st.WallTimeNs != narrow {
			sc.errorf(T, row, part, "wall_time_ns", "wall_time_ns %d != t_output - t_schedule_start = %d (first step of the worker)", st.WallTimeNs, narrow)
		}
		return
	}
	want := st.TOutput - prev.tUpdateEnd
	how := fmt.Sprintf("t_output - previous t_update_end %d (inter-update period)", prev.tUpdateEnd)
	if afterIdle {
		how += fmt.Sprintf(", or t_output - t_schedule_start = %d after idle", narrow)
	}
	if st.WallTimeNs != want {
		sc.errorf(T, row, part, "wall_time_ns", "wall_time_ns %d != %s = %d", st.WallTimeNs, how, want)
	}
}
