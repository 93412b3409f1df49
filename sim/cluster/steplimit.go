package cluster

import (
	"fmt"

	"github.com/steplab/steplab/datasets"
)

// StepLimitError ends a run that was about to take more steps than its
// plan allows (Plan.MaxSteps). The sinks saw every step up to the limit.
type StepLimitError struct{ Max int64 }

func (e *StepLimitError) Error() string {
	return fmt.Sprintf("stopped at its step limit: %d steps ran and the run had not finished", e.Max)
}

// stepLimit counts the steps of every engine, in the order the sinks
// receive them (deterministic, side by side or not).
type stepLimit struct{ n, max int64 }

func (l *stepLimit) Step(*datasets.Step, []datasets.StepRequest) error {
	if l.n++; l.n > l.max {
		return &StepLimitError{Max: l.max}
	}
	return nil
}

func (l *stepLimit) Request(*datasets.Request) error { return nil }
