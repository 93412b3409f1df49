package importers

import (
	"hash/fnv"
	"strconv"

	"github.com/steplab/steplab/datasets"
)

// BurstGPT columns (HPMLL/BurstGPT README.md @ e92f533b, "Schema"). The
// first three are required; Session ID and Elapsed time exist in the
// BurstGPT_3 release only.
const (
	burstColTime     = "Timestamp"
	burstColRequest  = "Request tokens"
	burstColResponse = "Response tokens"
	burstColTotal    = "Total tokens"
	burstColModel    = "Model"
	burstColLogType  = "Log Type"
	burstColSession  = "Session ID"
	burstColElapsed  = "Elapsed time"
)

// runBurstGPT reads a BurstGPT trace CSV (HPMLL/BurstGPT, read at e92f533b:
// the README's schema; the data files themselves are Git LFS objects). Per
// row: Timestamp is the submission time in seconds from midnight of the
// trace's first day, in its local time zone; Request and Response tokens
// are the lengths; a failed request has 0 response tokens (the files
// without "without_fails" in their name keep them); Elapsed time
// (BurstGPT_3) is the time from submission to the complete response, in
// seconds.
//
// Rows must be in time order (an earlier Timestamp than the row before is
// an error naming the line). arrival_ns is Timestamp relative to the first
// row; a failed request is written with status aborted and no times; with
// Elapsed time a request's finish_ns is arrival + elapsed (status finished,
// first token unknown: the trace has no TTFT); without it the trace has no
// outcomes (status not_run). Model and Log Type are counted in
// Source.Detail; Session ID is not kept (the requests table has no session
// column): the number of sessions is noted. A Total tokens value that is not
// Request + Response tokens is counted and noted.
func runBurstGPT(in *input, s *sink) error {
	c, err := newCSVRows(in.name, in, burstColTime, burstColRequest, burstColResponse)
	if err != nil {
		return err
	}
	hasElapsed := c.has(burstColElapsed)
	counts := map[string]int64{}
	sessions := map[uint64]struct{}{} // FNV-1a of the id: millions of rows
	h := fnv.New64a()
	var t0, prev float64
	var failed, badTotal int64
	n := 0
	for c.scan() {
		line, field := c.line, c.field
		ts, _, err := field(burstColTime)
		if err != nil {
			return err
		}
		t, err := strconv.ParseFloat(ts, 64)
		if _, ok := secondsToNs(t); err != nil || !ok || t < 0 {
			return lineError(in.name, line, "%s: %q is not a time in seconds", burstColTime, ts)
		}
		if n == 0 {
			t0 = t
			s.detail("first_timestamp_s", ts)
		} else if t < prev {
			return lineError(in.name, line, "%s: %s is earlier than the previous row's %s; arrivals must be in time order", burstColTime, ts,
				strconv.FormatFloat(prev, 'f', -1, 64))
		}
		prev = t
		var tok [3]int64
		for k, c := range []string{burstColRequest, burstColResponse, burstColTotal} {
			v, ok, err := field(c)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if tok[k], err = parseCount(v); err != nil {
				return lineError(in.name, line, "%s: %v", c, err)
			}
		}
		if c.has(burstColTotal) && tok[2] != tok[0]+tok[1] {
			badTotal++
		}
		for _, c := range []string{burstColModel, burstColLogType} {
			if v, ok, err := field(c); err != nil {
				return err
			} else if ok {
				counts[c+"."+v]++
			}
		}
		if v, ok, err := field(burstColSession); err != nil {
			return err
		} else if ok && v != "" {
			h.Reset()
			_, _ = h.Write([]byte(v))
			sessions[h.Sum64()] = struct{}{}
		}
		arrival, _ := secondsToNs(t - t0)
		r := traceRequest(n, arrival, tok[0], tok[1])
		switch {
		case tok[1] == 0:
			r.Status = datasets.StatusAborted
			failed++
		case hasElapsed:
			v, _, err := field(burstColElapsed)
			if err != nil {
				return err
			}
			e, err := strconv.ParseFloat(v, 64)
			d, ok := secondsToNs(e)
			if err != nil || !ok || e < 0 {
				return lineError(in.name, line, "%s: %q is not a duration in seconds", burstColElapsed, v)
			}
			r.FinishNs, r.Status = arrival+d, datasets.StatusFinished
		}
		if err := s.addRequest(r); err != nil {
			return err
		}
		n++
	}
	if c.err != nil {
		return c.err
	}
	for _, k := range sortedKeys(counts) {
		s.detail(k, strconv.FormatInt(counts[k], 10))
	}
	s.m.Workload = &datasets.Workload{Kind: "trace", Params: map[string]string{"format": "burstgpt", "requests": strconv.Itoa(n)}}
	s.note("burstgpt: arrival_ns is Timestamp (seconds from midnight of the trace's first day, local time) relative to the first row; req_id is the zero-based row index")
	if hasElapsed {
		s.note("burstgpt: finish_ns = arrival + Elapsed time (submission to complete response, as the client saw it); no first-token time (the trace has no TTFT)")
	} else {
		s.note("burstgpt: no Elapsed time column: no event times (status not_run)")
	}
	if failed > 0 {
		s.note("%d requests have 0 response tokens, BurstGPT's mark of a failed request: status aborted", failed)
	}
	if badTotal > 0 {
		s.note("%d rows have a %s that is not %s + %s", badTotal, burstColTotal, burstColRequest, burstColResponse)
	}
	if len(sessions) > 0 {
		s.note("%s not kept (no session column in requests): about %d sessions", burstColSession, len(sessions))
	}
	return nil
}
