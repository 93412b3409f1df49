// Package rng gives the simulator seeded random streams, one per subsystem.
//
// Every random draw in steplab's simulator comes from a *Stream derived from
// the run's root seed and a name ("workload/arrivals", "workload/prompt",
// "sched/tiebreak", ...). No code in sim/ uses math/rand's global state or the
// wall clock.
//
// Why one stream per subsystem: if every consumer drew from one shared
// generator, adding a single draw anywhere (a new jitter in the executor, an
// extra length sample) would shift every later number of every other
// consumer, and a what-if comparison would change in places the change never
// touched. With independent streams, a subsystem's sequence depends only on
// (root seed, its name, its own draws): arrival times stay identical when the
// length distribution changes, and the length samples stay identical when the
// executor adds noise. Repetitions and sweep points get their own streams via
// Derive and DeriveN, so repetition 3 of sweep point 7 is reproducible on its
// own without replaying points 0..6.
//
// The derivation is fixed: seed = mix(mix(parent) ^ fnv1a64(name)) with
// SplitMix64's finalizer as mix, and the generator is math/rand/v2's PCG seeded
// with two further mixes of that seed. Both are part of the package's
// compatibility promise: golden values in the tests pin them, and a change
// that breaks them breaks every recorded simulation's reproducibility.
package rng
