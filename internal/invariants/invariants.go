// Package invariants switches on the consistency checks that the
// scheduler, the KV block pool, the engine and the dataset writer run after
// every step, in the manner of pebble's invariants build tag: built with
// `-tags invariants` they run and panic with the violation; built without,
// Enabled is a false constant and every `if invariants.Enabled { … }` block
// compiles to nothing.
package invariants

import "fmt"

// Failf panics with an invariant violation: what was checked, where, and
// the values that broke it.
func Failf(format string, args ...any) {
	panic("invariant violated: " + fmt.Sprintf(format, args...))
}
