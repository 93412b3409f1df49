// Package des is steplab's discrete-event core: a virtual clock and an event
// queue ordered by (time, insertion sequence).
//
// Two events at the same virtual time fire in the order they were scheduled,
// so a simulation that schedules its events in a deterministic order runs
// identically every time: the queue never consults the wall clock, map
// iteration order or pointer addresses. The queue is a binary heap; Schedule
// and Step cost O(log n).
//
// A simulation builds a Sim, schedules its first events and calls Run (or
// Step in a loop). Handlers receive the event's time, which is also Sim.Now
// while they run, and may schedule further events at that time or later;
// scheduling into the past is an error (Run reports it).
package des
