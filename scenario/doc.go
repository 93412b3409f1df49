// Package scenario turns what a user writes into what the simulator runs,
// once: a YAML scenario (or a recorded run's manifest) becomes a plan,
// and a plan becomes a run and its dataset.
//
// # Three steps
//
// A Scenario names the GPU, the model, the forward-pass and host models,
// the engine limits, the workload, the output and, in its cluster block,
// how many engines there are and how they are placed. Default is the
// README's job (the embedded Azure conversation trace on Llama-3.1-8B on
// one H200); Load reads a YAML file over it and Set applies one
// `--set KEY=VALUE` override, so every field a document has can be
// changed from the command line. Unknown keys are refused with the line
// and the keys valid there.
//
// Plan checks the scenario and resolves it, refusing what could not run
// with one message per fault that names the field and says what to
// change. It looks the GPU and the model up in the catalogue once, sizes
// each pool's KV cache (catalog.KVBlocks, the experts' share of an
// expert-parallel pool included), prices each pool's engine
// (pricing.Price: the one place an FPM or a host spec string becomes
// models) and resolves the links. The result is a Plan: a cluster.Plan of
// plain data (sim/cluster builds and drives its engines; one engine is a
// cluster of one) beside the scenario it came from.
//
// Run opens the workload (a trace dataset, an embedded trace imported to
// a temporary directory, a generator seeded from the scenario, or a
// self-benchmark grid), writes the manifest that describes the plan and
// runs the engines into a dataset. Simulate runs without a dataset (a
// sweep point), Bounds at the edges of the FPM's prediction intervals,
// Execute on a real worker (package capture).
//
// # Manifests back to plans
//
// Plan.Manifest records everything the plan was made of; PlanFromManifest
// is its inverse, so a recorded run (simulated, captured or imported) is
// re-simulated on the engines it ran on. What a manifest leaves out takes
// the default and says so in a warning; a placement (ManifestOptions.Spec,
// LoadSpec) supplies what an import cannot record.
//
// # What lives where
//
// Packages sim and sim/cluster never read a document: no YAML, no
// manifest, no spec string. They take the plain plans this package
// builds, which a program may also fill itself. YAML is read through
// internal/yamldoc (one alias budget, one error style for every document)
// and specs are priced through package pricing, both only from here.
//
// The same scenario and seed give a byte-identical dataset, on any number
// of processors.
package scenario
