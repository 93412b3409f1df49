// Package model holds what steplab knows about the cost of an engine step:
// step features, forward-pass models (FPM) behind one interface, the payload
// model (bytes a scheduler ships per step), the host-overhead model, and
// versioned JSON model artifacts.
//
// The forms: Linear (Σ coef·term over the named basis terms), Grid
// (interpolation over decode and prefill benchmark grids), Roofline (the
// prior from hardware and shape), and Recipe, the default: per step kind a
// Table over named coordinates (Coord) interpolating inside its measured
// hull (its cell coverage) and a Linear outside it, mixed steps composed
// from prefill and decode. An IntervalFPM also returns an interval
// (PredictIntervalNs); a Pricer (Recipe) says which kind model priced a
// step and whether it interpolated or extrapolated; Bound turns one edge
// of an interval into an FPM to re-simulate with.
//
// It reads no files but its own artifacts and imports no other steplab
// package: an FPM knows features and durations, not datasets.
package model
