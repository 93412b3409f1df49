// Package model holds what steplab knows about the cost of an engine step:
// step features, forward-pass models (FPM) behind one interface, the payload
// model (bytes a scheduler ships per step), the host-overhead model, and
// versioned JSON model artifacts.
//
// # The catalogue
//
// The roofline prior (Roofline) and the memory model (KVBlocks) price a
// step from a Hardware and a Shape, and both are data. A Hardware is read
// from a YAML spec file: datasheet figures (memory, bandwidth, dense peaks
// per dtype, SMs, clock, interconnects) and the achievable-fraction curves
// the roofline uses (RooflineParams, "generic" for GPUs without
// measurements). A Shape is read from a Hugging Face config.json: dense or
// mixture-of-experts MLPs, GQA or MLA attention, sliding-window layers,
// weight and KV dtypes, with notes on whatever the config left out.
//
// The built-in catalogue embeds a spec file per GPU (A100 to B200, GeForce
// and RTX PRO cards, MI300X/MI325X) and a config.json per model; the
// directories listed in STEPLAB_CATALOG extend it. Resolve names with
//
//	hw, err := catalog.LookupHardware("NVIDIA GeForce RTX 4090") // any spelling, or a *.yaml path
//	s, err := catalog.LookupModel("Qwen/Qwen3-30B-A3B")          // org/ and -Instruct optional, or a config.json path
//	s, err = s.WithDTypes("fp8", "fp8")                        // what the scenario serves
//	r := fpm.NewRoofline(hw, s)
//
// or hold a Catalog of your own (LoadCatalog). docs/catalog.md documents the
// spec file format, the name-resolution rule and the MoE/MLA assumptions;
// `steplab catalog` lists and shows entries.
//
// # The forward-pass models
//
// Linear (Σ coef·term over the named basis terms) and Grid (interpolation
// over decode and prefill benchmark grids) are fitted to captured steps
// (package fit); Roofline prices a step from the hardware's peaks and the
// model shape; Ops composes the latencies of the operations of a forward
// pass from a database of kernels measured on the GPU (OpDB, read by
// package fpm/opdb) and, with FitRooflineEfficiency, measures the
// roofline's efficiencies. Recipe, the default fitted form, holds per step
// kind a Table over named coordinates (Coord) interpolating inside its
// measured hull (its cell coverage) and a Linear outside it, mixed steps
// composed from prefill and decode. An IntervalFPM also returns an
// interval (PredictIntervalNs); a Pricer (Recipe) says which kind model
// priced a step and whether it interpolated or extrapolated; Bound turns
// one edge of an interval into an FPM to re-simulate with.
//
// It reads no files but its own artifacts, catalogue entries and the files
// a caller names, and imports no other steplab package: an FPM knows
// features and durations, not datasets.
package fpm
