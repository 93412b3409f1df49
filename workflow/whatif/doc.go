// Package whatif runs what-if scenarios: a workflow graph of stages placed
// on hosts (package workflow), under an open- or closed-loop load,
// repeated on fresh simulated servers for each placement, and reports the
// audit table of an offered-load qualification (request-window throughput
// by AIPerf's definition, achieved/offered, full-process throughput, errors,
// cancellations, and latency percentiles per stage and end to end).
//
// A scenario is YAML (docs/whatif.md lists every key). Load parses it into a
// Doc, keeping the YAML node tree so that every error names its line and so
// that Set can override any key before Compile turns it into a runnable
// Scenario. Run simulates it and Write stores the outputs (audit.json,
// audit.md, and the requests and request_stages tables of a steplab
// dataset). The same scenario and seed give byte-identical outputs.
package whatif
