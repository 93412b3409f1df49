//go:build invariants

package invariants

// Enabled: built with -tags invariants, the checks run.
const Enabled = true
