//go:build !invariants

package invariants

// Enabled: built without -tags invariants, the checks compile to nothing.
const Enabled = false
