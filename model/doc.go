// Package model holds what steplab knows about the cost of an engine step:
// step features, forward-pass models (FPM) behind one interface, the payload
// model (bytes a scheduler ships per step), the host-overhead model, and
// versioned JSON model artifacts.
//
// The FPMs: Linear and Grid are fitted to captured steps (package fit);
// Roofline prices a step from the hardware's peaks and the model shape;
// Ops composes the latencies of the operations of a forward pass from a
// database of kernels measured on the GPU (OpDB, read by package
// datasets/opdb) and, with FitRooflineEfficiency, measures the roofline's
// efficiencies.
//
// It reads no files but its own artifacts and imports no other steplab
// package: an FPM knows features and durations, not datasets.
package model
