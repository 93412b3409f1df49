// Package sweep runs a what-if scenario (package whatif) over the cartesian
// grid of values of one or more keys, in parallel across cores, and writes
// one Parquet table (a row per point × placement × repetition, the varied
// values as columns) and figures of throughput and p90 latency against the
// offered load, one line per placement.
//
// Each point is the scenario with its values set (as whatif's --set) and a
// seed derived from the scenario's seed and the point's index (rng.DeriveN),
// so a point is reproducible on its own and the results do not depend on
// the number of goroutines: points are simulated independently and gathered
// in index order. The first --vary key changes slowest.
package sweep
