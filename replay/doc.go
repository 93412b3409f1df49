// Package replay compares a model with a record, step by step and request
// by request, and calibrates a model so that re-simulated requests match
// the record (docs/architecture.md#architecture).
//
// Step replay (ReplaySteps) re-prices every recorded step: the FPM prices
// the step's composition (device time) and the host model of the simulated
// executor prices its host phases (schedule, ship, worker prep). Nothing is
// re-scheduled: the record's compositions are priced as they are. Fields
// that depend on neighbouring steps (narrow and wall time under async
// scheduling) are re-derived one step ahead: this step's phases are
// predicted, its neighbours' events are taken from the record (see
// StepReplayer). With the model that generated a simulated dataset, every
// field is reproduced exactly.
//
// Request replay (ReplayRequests) re-simulates the recorded arrivals and
// lengths with the sim engine under the manifest's engine configuration and
// compares TTFT, ITL and E2E per request and as distributions.
//
// A model with prediction intervals (fpm.IntervalFPM) carries them
// through both: step replay adds the device time's interval to every row
// and reports how many recorded steps fell inside it (StepIntervals);
// request replay re-simulates twice more with every step at the lower and
// at the upper edge of its interval (RequestIntervals).
//
// Calibration (Calibrate) fits a small parameter vector — multipliers on
// an FPM's terms and the host model's fixed costs — by Nelder-Mead over
// log-parameters so that re-simulated request metrics match the record.
package replay
