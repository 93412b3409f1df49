package fit

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors of degenerate input. Every error the fitting procedures
// return for bad data wraps one of these (test with errors.Is) and its
// message names the offending term or row; a *DataError carries them as
// fields. Nothing here ever returns a model fitted to such data.
var (
	// ErrEmptySelection: the row selection matched no rows.
	ErrEmptySelection = errors.New("empty selection")
	// ErrTooFewRows: fewer than max(5, 2×terms) rows.
	ErrTooFewRows = errors.New("too few rows")
	// ErrBadTarget: a timing is NaN, ±Inf, negative or zero.
	ErrBadTarget = errors.New("bad timing")
	// ErrBadFeature: a term value is NaN, ±Inf or negative.
	ErrBadFeature = errors.New("bad feature value")
	// ErrZeroColumn: a term is zero on every row (the data cannot say
	// anything about its coefficient).
	ErrZeroColumn = errors.New("all-zero term")
	// ErrConstantColumn: a term other than const has the same value on
	// every row, so it cannot be told apart from the fixed cost.
	ErrConstantColumn = errors.New("constant term")
	// ErrRankDeficient: some terms are (nearly) linear combinations of
	// others; the message names them.
	ErrRankDeficient = errors.New("rank-deficient design")
	// ErrNoConvergence: an iterative solver ran out of iterations.
	ErrNoConvergence = errors.New("no convergence")
	// ErrPolicyMix: datasets of measurement policies a load cannot
	// separate (LoadOptions.Policy).
	ErrPolicyMix = errors.New("measurement policies mixed")
)

// DataError is a degenerate-input error: Kind is one of the sentinels,
// Terms the terms involved, Row the 0-based row index (−1 if none) and
// StepID the step_id of that row where known (−1 otherwise).
type DataError struct {
	Kind   error
	Terms  []string
	Row    int
	StepID int64
	Detail string
}

func (e *DataError) Error() string {
	var b strings.Builder
	b.WriteString("fit: ")
	b.WriteString(e.Kind.Error())
	if len(e.Terms) > 0 {
		fmt.Fprintf(&b, " (terms %s)", strings.Join(e.Terms, ", "))
	}
	if e.Row >= 0 {
		fmt.Fprintf(&b, " at row %d", e.Row)
		if e.StepID >= 0 {
			fmt.Fprintf(&b, " (step_id %d)", e.StepID)
		}
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrTooFewRows) and friends work.
func (e *DataError) Unwrap() error { return e.Kind }

func dataErr(kind error, detail string, terms ...string) *DataError {
	return &DataError{Kind: kind, Terms: terms, Row: -1, StepID: -1, Detail: detail}
}
