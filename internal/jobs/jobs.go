// Package jobs resolves how many goroutines a command runs at once: its
// --jobs flag against the processors Go schedules on (GOMAXPROCS) and the
// machine's cores (runtime.NumCPU: those this process may run on). Asking
// for more than the cores gains nothing, so it is clamped and said.
package jobs

import (
	"fmt"
	"log/slog"
	"runtime"
)

// ClampProcs lowers GOMAXPROCS to the machine's cores when it was set
// above them, with a warning.
func ClampProcs() {
	if p, n := runtime.GOMAXPROCS(0), runtime.NumCPU(); p > n {
		slog.Warn(fmt.Sprintf("GOMAXPROCS=%d is more than the %d cores of this machine: using %d", p, n, n))
		runtime.GOMAXPROCS(n)
	}
}

// Resolve is the number of jobs for a --jobs value: requested, or
// GOMAXPROCS when it is 0, clamped (with a warning) to the machine's
// cores; GOMAXPROCS is clamped first (ClampProcs). A negative value is
// refused.
func Resolve(requested int) (int, error) {
	if requested < 0 {
		return 0, fmt.Errorf("--jobs %d: must be 0 (every core) or more", requested)
	}
	ClampProcs()
	if requested == 0 {
		return runtime.GOMAXPROCS(0), nil
	}
	if n := runtime.NumCPU(); requested > n {
		slog.Warn(fmt.Sprintf("--jobs %d is more than the %d cores of this machine: using %d", requested, n, n))
		return n, nil
	}
	return requested, nil
}
