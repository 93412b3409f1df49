package fit

import (
	"errors"
	"fmt"
	"sort"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fpm"
)

// Host windows FitHostSteps fits beyond FitHost's, and the HostModel
// coefficients their terms map to.
var (
	HostScheduleTermNames = []string{"schedule_fixed_ns", "schedule_per_req_ns", "schedule_per_new_req_ns"}
	HostUpdateTermNames   = []string{"update_fixed_ns", "update_per_req_ns"}
	HostOutputTermNames   = []string{"output_fixed_ns", "output_per_req_ns"}
)

// HostStepsOptions say how the recorded steps' windows map to the host
// model's phases.
type HostStepsOptions struct {
	// Serial is a worker that ran each step to its end before reading the
	// next (datasets.EngineConfig.SerialWorker): its shipping phase is
	// the worker's receive alone (the driver serialized the step while the
	// previous one ran), and its output path is measured (below).
	Serial bool
}

// FitHostSteps fits every host phase the steps record, each on its own
// window, as FitHost does: input preparation (host_prep_ns) on
// HostPrepTerms; shipping on 1 and payload bytes (worker_recv_ns, plus
// the driver's serialization t_dispatch − t_schedule_end unless the worker
// is serial); schedule() (t_schedule_end − t_schedule_start) on 1,
// requests and new requests; update_from_output() (t_update_end −
// t_output) on 1 and requests. For a serial worker, also the output path
// after the forward pass (sampling, the tokens' copy, the reply) on 1 and
// requests: over each step scheduled while the one before it ran, what
// the inter-update period holds beyond the step's device time, receive
// and preparation, with the previous step's update added back (the
// period starts after it, the worker's next step does not):
//
//	wall(N) + update(N−1) − gpu(N) − recv(N) − prep(N)
//
// which is what a serial worker's step costs beyond the phases the model
// prices already. The target is a difference of measured windows, so its
// noise may cross zero on a step; NNLS fits the mean. Phases no step
// records keep prior's coefficients, and so do those whose terms the steps
// do not separate (a run of one prompt length: new requests and their
// tokens move together) or that too few steps record, listed in Unfitted.
// steps need not be sorted.
func FitHostSteps(steps []datasets.Step, reqs []datasets.StepRequest, prior fpm.HostModel, o HostStepsOptions) (*HostFit, error) {
	steps = append([]datasets.Step(nil), steps...)
	sort.SliceStable(steps, func(i, j int) bool {
		if steps[i].WorkerID != steps[j].WorkerID {
			return steps[i].WorkerID < steps[j].WorkerID
		}
		return steps[i].StepID < steps[j].StepID
	})
	rows, w := HostStepsFromTables(steps, reqs)
	out := &HostFit{Model: prior}
	// Unchunked prompts schedule requests − new requests + new tokens
	// tokens on every step: the per-token cost is then the others'
	// combination, carried by them exactly, and fixed at zero.
	redundant := true
	for _, r := range rows {
		redundant = redundant && r.ScheduledTokens == r.Requests-r.NewRequests+r.NewTokens
	}
	for _, win := range hostWindows(steps, w, &out.Model, o.Serial) {
		var x, y []float64
		for i, r := range rows {
			if v, ok := win.y(i); ok {
				x = append(x, win.terms(r)...)
				y = append(y, v)
			}
		}
		if len(y) == 0 {
			continue
		}
		if redundant && win.name == "host_prep_ns" {
			const tok = 2 // prep_per_token_ns in HostPrepTerms
			for k := tok; k < len(x); k += len(win.names) {
				x[k] = 0
			}
			win.prior[tok] = 0
		}
		fitW := fitTerms
		if win.signed {
			fitW = solveTerms
		}
		tf, err := fitW(win.name, win.names, x, y, win.prior)
		if errors.Is(err, ErrRankDeficient) || errors.Is(err, ErrTooFewRows) {
			out.Unfitted = append(out.Unfitted, err.Error())
			continue
		}
		if err != nil {
			return nil, err
		}
		win.set(tf.Coef)
		out.Fits = append(out.Fits, tf)
	}
	if len(out.Fits) == 0 && len(out.Unfitted) == 0 {
		return nil, fmt.Errorf("fit: host: the steps record no host window (host_prep_ns, worker_recv_ns, schedule or update times)")
	}
	return out, out.Model.Validate()
}

// hostWindow is one measured window of FitHostSteps: its terms, its value
// on step i (false: not recorded there), the coefficients it starts from
// and where the fit goes in the model.
type hostWindow struct {
	name  string
	names []string
	terms func(fpm.HostStep) []float64
	y     func(i int) (float64, bool)
	prior []float64
	set   func(c []float64)
	// signed: the target may be negative on a row (a difference).
	signed bool
}

// known says whether every time was recorded.
func known(ts ...int64) bool {
	for _, t := range ts {
		if t < 0 {
			return false
		}
	}
	return true
}

// hostWindows are the windows of m's phases that steps (sorted by worker
// and step) record, w the windows HostStepsFromTables read.
func hostWindows(steps []datasets.Step, w HostWindows, m *fpm.HostModel, serial bool) []hostWindow {
	perByte := 0.0
	if m.ShipMBps > 0 {
		perByte = 1e3 / m.ShipMBps
	}
	shipName := "serialize_ns+worker_recv_ns"
	if serial {
		shipName = "worker_recv_ns"
	}
	ws := []hostWindow{
		{"host_prep_ns", HostPrepTermNames, HostPrepTerms,
			func(i int) (float64, bool) { return w.PrepNs[i], w.PrepNs[i] >= 0 },
			[]float64{m.PrepFixedNs, m.PrepPerReqNs, m.PrepPerTokenNs, m.PrepPerNewReqNs, m.PrepPerNewTokenNs},
			func(c []float64) {
				m.PrepFixedNs, m.PrepPerReqNs, m.PrepPerTokenNs, m.PrepPerNewReqNs, m.PrepPerNewTokenNs = c[0], c[1], c[2], c[3], c[4]
			}, false},
		{shipName, HostShipTermNames, HostShipTerms,
			func(i int) (float64, bool) {
				s := &steps[i]
				if serial {
					return float64(s.WorkerRecvNs), s.WorkerRecvNs >= 0
				}
				return float64(s.TDispatch - s.TScheduleEnd + s.WorkerRecvNs), known(s.TDispatch, s.TScheduleEnd, s.WorkerRecvNs)
			},
			[]float64{m.ShipFixedNs, perByte},
			func(c []float64) {
				m.ShipFixedNs, m.ShipMBps = c[0], 0
				if c[1] > 0 {
					m.ShipMBps = 1e3 / c[1]
				}
			}, false},
		{"schedule_ns", HostScheduleTermNames,
			func(s fpm.HostStep) []float64 { return []float64{1, float64(s.Requests), float64(s.NewRequests)} },
			func(i int) (float64, bool) {
				s := &steps[i]
				return float64(s.TScheduleEnd - s.TScheduleStart), known(s.TScheduleStart, s.TScheduleEnd)
			},
			[]float64{m.ScheduleFixedNs, m.SchedulePerReqNs, m.SchedulePerNewReqNs},
			func(c []float64) { m.ScheduleFixedNs, m.SchedulePerReqNs, m.SchedulePerNewReqNs = c[0], c[1], c[2] }, false},
		{"update_ns", HostUpdateTermNames,
			func(s fpm.HostStep) []float64 { return []float64{1, float64(s.Requests)} },
			func(i int) (float64, bool) {
				s := &steps[i]
				return float64(s.TUpdateEnd - s.TOutput), known(s.TOutput, s.TUpdateEnd)
			},
			[]float64{m.UpdateFixedNs, m.UpdatePerReqNs},
			func(c []float64) { m.UpdateFixedNs, m.UpdatePerReqNs = c[0], c[1] }, false},
	}
	if serial {
		ws = append(ws, hostWindow{"output_ns", HostOutputTermNames,
			func(s fpm.HostStep) []float64 { return []float64{1, float64(s.Requests)} },
			func(i int) (float64, bool) {
				if i == 0 {
					return 0, false
				}
				s, prev := &steps[i], &steps[i-1]
				if !s.Overlapped || prev.WorkerID != s.WorkerID || prev.StepID != s.StepID-1 ||
					!known(s.WallTimeNs, s.GPUTimeNs, s.WorkerRecvNs, s.HostPrepNs, prev.TOutput, prev.TUpdateEnd) {
					return 0, false
				}
				return float64(s.WallTimeNs + prev.TUpdateEnd - prev.TOutput - s.GPUTimeNs - s.WorkerRecvNs - s.HostPrepNs), true
			},
			[]float64{m.OutputFixedNs, m.OutputPerReqNs},
			func(c []float64) { m.OutputFixedNs, m.OutputPerReqNs = c[0], c[1] }, true})
	}
	return ws
}
