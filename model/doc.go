// Package model holds what steplab knows about the cost of an engine step:
// step features, forward-pass models (FPM) behind one interface, the payload
// model (bytes a scheduler ships per step), the host-overhead model, and
// versioned JSON model artifacts.
//
// It reads no files but its own artifacts and imports no other steplab
// package: an FPM knows features and durations, not datasets.
package model
