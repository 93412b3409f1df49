package sim

// VirtualClock is the simulator's clock: host work advances it by its
// modelled cost, waits jump it forward. It never reads the wall clock.
type VirtualClock struct{ t int64 }

// Now is the current virtual time in ns since the run's start.
func (c *VirtualClock) Now() int64 { return c.t }

// Spend advances the clock by ns of host work.
func (c *VirtualClock) Spend(ns int64) {
	if ns > 0 {
		c.t += ns
	}
}

// AdvanceTo moves the clock to t if t is later.
func (c *VirtualClock) AdvanceTo(t int64) {
	if t > c.t {
		c.t = t
	}
}
