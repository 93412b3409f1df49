package features

import (
	"fmt"
	"io"
	"math"

	"github.com/steplab/steplab/datasets"
)

// reqCols is the projection of step_requests a join reads.
type reqCols struct {
	StepID             int64 `parquet:"step_id"`
	IsNew              bool  `parquet:"is_new"`
	IsResumed          bool  `parquet:"is_resumed" default:"false"`
	IsPrefill          bool  `parquet:"is_prefill"`
	NumScheduledTokens int64 `parquet:"num_scheduled_tokens"`
	NumComputedTokens  int64 `parquet:"num_computed_tokens"`
	PromptLen          int64 `parquet:"prompt_len"`
}

func (r *reqCols) addTo(b *Batch) {
	b.AddRequest(Request{r.IsNew, r.IsResumed, r.IsPrefill, r.NumScheduledTokens, r.NumComputedTokens, r.PromptLen})
}

// RequestJoin streams a dataset's step_requests table alongside its steps
// (both in step order, as steplab writes them) and completes each step
// from its rows, in memory bounded by one read buffer.
type RequestJoin struct {
	s    *datasets.Scanner[reqCols]
	buf  []reqCols
	i, n int
	eof  bool
	last int64
	off  bool
	used bool
	err  error
	b    Batch
}

// NewRequestJoin opens the dataset's step_requests table; it returns nil
// and no error when the dataset has none.
func NewRequestJoin(d *datasets.Dataset) (*RequestJoin, error) {
	if !d.Has(datasets.TableStepRequests) {
		return nil, nil
	}
	s, err := datasets.Scan[reqCols](d, datasets.TableStepRequests)
	if err != nil {
		return nil, err
	}
	return &RequestJoin{s: s, buf: make([]reqCols, 8192), last: math.MinInt64}, nil
}

// Complete fills the unknown composition columns of st (see
// Batch.Complete) from the rows of step st.StepID and reports whether it
// found any. Call it for every step, in table order. Once step ids stop
// increasing (several workers in one table, unordered steps) the rows can
// no longer be matched: the join turns off (Off) and completes nothing
// more. A nil join completes nothing.
func (j *RequestJoin) Complete(st *datasets.Step) bool {
	if j == nil || j.off || j.err != nil {
		return false
	}
	if st.StepID <= j.last {
		j.off = true
		return false
	}
	j.last = st.StepID
	for j.fill() && j.buf[j.i].StepID < st.StepID {
		j.i++
	}
	// A step that records every column needs only to be matched: its
	// batch would complete nothing.
	add := !Known(st)
	j.b.Reset()
	found := false
	for j.fill() && j.buf[j.i].StepID == st.StepID {
		if add {
			j.buf[j.i].addTo(&j.b)
		}
		found = true
		j.i++
	}
	if found {
		j.b.Complete(st)
		j.used = true
	}
	return found
}

func (j *RequestJoin) fill() bool {
	if j.i < j.n {
		return true
	}
	if j.eof {
		return false
	}
	n, err := j.s.Read(j.buf)
	if err == io.EOF {
		j.eof = true
		return false
	}
	if err != nil {
		j.err, j.eof = fmt.Errorf("%s: %w", datasets.TableStepRequests, err), true
		return false
	}
	j.i, j.n = 0, n
	return true
}

// Used reports whether some step was completed from its rows; Off whether
// the join gave up because step ids repeat or are unordered.
func (j *RequestJoin) Used() bool { return j != nil && j.used }

// Off reports whether the join gave up (step ids not increasing).
func (j *RequestJoin) Off() bool { return j != nil && j.off }

// Err is the first read error of the step_requests table.
func (j *RequestJoin) Err() error {
	if j == nil {
		return nil
	}
	return j.err
}

// Close releases the table.
func (j *RequestJoin) Close() error {
	if j == nil {
		return nil
	}
	return j.s.Close()
}

// CompleteSteps completes steps (the dataset's steps table, whole and in
// order) from the dataset's step_requests when some row needs it. It
// returns how many rows it completed and whether the rows could be matched
// throughout (false: step ids repeat or are unordered, as with several
// workers in one table). Rows it could not complete keep their unknown
// columns; Of derives what it can.
func CompleteSteps(d *datasets.Dataset, steps []datasets.Step) (completed int, matched bool, err error) {
	need := false
	for i := range steps {
		if !Known(&steps[i]) {
			need = true
			break
		}
	}
	if !need {
		return 0, true, nil
	}
	j, err := NewRequestJoin(d)
	if err != nil || j == nil {
		return 0, err == nil, err
	}
	defer j.Close()
	for i := range steps {
		if j.Complete(&steps[i]) {
			completed++
		}
	}
	return completed, !j.Off(), j.Err()
}
