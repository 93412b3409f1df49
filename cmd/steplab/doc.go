// Command steplab stores, simulates, fits, replays and captures LLM-serving
// step timings. Run `steplab --help` for the subcommands.
package main
