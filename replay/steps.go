package replay

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/features"
	"github.com/steplab/steplab/fpm"
	"github.com/steplab/steplab/sim"
)

// Timing fields compared by step replay (docs/architecture.md#step-timing-windows), in this order.
const (
	FieldGPU      = "gpu_time_ns"    // device time: the FPM
	FieldHostPrep = "host_prep_ns"   // worker input preparation: HostModel.PrepNs
	FieldSchedule = "schedule_ns"    // t_schedule_end − t_schedule_start: HostModel.ScheduleNs
	FieldNarrow   = "narrow_time_ns" // t_output − t_schedule_start (re-derived, see StepReplayer)
	FieldWall     = "wall_time_ns"   // inter-update period (re-derived, see StepReplayer)
)

// Fields lists the compared timing fields in report order.
var Fields = []string{FieldGPU, FieldHostPrep, FieldSchedule, FieldNarrow, FieldWall}

const nFields = 5

const (
	fGPU = iota
	fPrep
	fSched
	fNarrow
	fWall
)

// StepRow is one row of a step replay's step_comparison table: a recorded step, its
// re-priced timing fields and their errors. For each field X:
// rec_X is the record (−1 when the source did not record it), pred_X the
// prediction, err_X = pred_X − rec_X in ns (0 when rec_X is unknown) and
// rel_err_X = err_X / rec_X (NaN when rec_X is unknown or 0). The device
// and wall times also carry the prediction interval (pred_X_lo_ns,
// pred_X_hi_ns).
type StepRow struct {
	Seq       int64  `parquet:"seq,delta"` // position in the steps table
	StepID    int64  `parquet:"step_id,delta"`
	WorkerID  string `parquet:"worker_id,dict"`
	Kind      string `parquet:"kind,dict"`
	Role      string `parquet:"role,dict"`
	BatchSize int32  `parquet:"batch_size,delta"` // requests scheduled (new + cached)
	Tokens    int64  `parquet:"total_scheduled_tokens,delta"`
	TSchedule int64  `parquet:"t_schedule_start,delta"`

	RecGPU     int64   `parquet:"rec_gpu_time_ns,delta"`
	PredGPU    int64   `parquet:"pred_gpu_time_ns,delta"`
	ErrGPU     int64   `parquet:"err_gpu_time_ns,delta"`
	RelErrGPU  float64 `parquet:"rel_err_gpu_time_ns"`
	RecPrep    int64   `parquet:"rec_host_prep_ns,delta"`
	PredPrep   int64   `parquet:"pred_host_prep_ns,delta"`
	ErrPrep    int64   `parquet:"err_host_prep_ns,delta"`
	RelErrPrep float64 `parquet:"rel_err_host_prep_ns"`

	RecSched    int64   `parquet:"rec_schedule_ns,delta"`
	PredSched   int64   `parquet:"pred_schedule_ns,delta"`
	ErrSched    int64   `parquet:"err_schedule_ns,delta"`
	RelErrSched float64 `parquet:"rel_err_schedule_ns"`

	RecNarrow    int64   `parquet:"rec_narrow_time_ns,delta"`
	PredNarrow   int64   `parquet:"pred_narrow_time_ns,delta"`
	ErrNarrow    int64   `parquet:"err_narrow_time_ns,delta"`
	RelErrNarrow float64 `parquet:"rel_err_narrow_time_ns"`
	RecWall      int64   `parquet:"rec_wall_time_ns,delta"`
	PredWall     int64   `parquet:"pred_wall_time_ns,delta"`
	ErrWall      int64   `parquet:"err_wall_time_ns,delta"`
	RelErrWall   float64 `parquet:"rel_err_wall_time_ns"`

	// The interval of the device time at StepReplayer.Level, and the same
	// interval carried to the wall time (the device time is the only
	// modelled uncertainty); −1 when the model has none.
	PredGPULo  int64 `parquet:"pred_gpu_time_lo_ns,delta"`
	PredGPUHi  int64 `parquet:"pred_gpu_time_hi_ns,delta"`
	PredWallLo int64 `parquet:"pred_wall_time_lo_ns,delta"`
	PredWallHi int64 `parquet:"pred_wall_time_hi_ns,delta"`
}

func (r *StepRow) rec(i int) int64 {
	switch i {
	case fGPU:
		return r.RecGPU
	case fPrep:
		return r.RecPrep
	case fSched:
		return r.RecSched
	case fNarrow:
		return r.RecNarrow
	}
	return r.RecWall
}

func (r *StepRow) pred(i int) int64 {
	switch i {
	case fGPU:
		return r.PredGPU
	case fPrep:
		return r.PredPrep
	case fSched:
		return r.PredSched
	case fNarrow:
		return r.PredNarrow
	}
	return r.PredWall
}

func errOf(rec, pred int64) (int64, float64) {
	if rec < 0 {
		return 0, math.NaN()
	}
	e := pred - rec
	if rec == 0 {
		return e, math.NaN()
	}
	return e, float64(e) / float64(rec)
}

// stepCols is the projection of the steps table step replay reads.
type stepCols struct {
	StepID               int64   `parquet:"step_id"`
	WorkerID             string  `parquet:"worker_id"`
	Kind                 string  `parquet:"kind"`
	Role                 string  `parquet:"role"`
	NumNewReqs           int32   `parquet:"num_new_reqs"`
	NumCachedReqs        int32   `parquet:"num_cached_reqs"`
	NumPrefillRequests   int32   `parquet:"num_prefill_requests"`
	SumPrefillTokens     int64   `parquet:"sum_prefill_tokens"`
	VarPrefillLength     float64 `parquet:"var_prefill_length"`
	SumPrefillKVTokens   int64   `parquet:"sum_prefill_kv_tokens"`
	NumDecodeRequests    int32   `parquet:"num_decode_requests"`
	SumDecodeKVTokens    int64   `parquet:"sum_decode_kv_tokens"`
	VarDecodeKVTokens    float64 `parquet:"var_decode_kv_tokens"`
	TotalScheduledTokens int64   `parquet:"total_scheduled_tokens"`
	PaddedTokens         int64   `parquet:"padded_tokens"`
	MaxDecodeKVTokens    int64   `parquet:"max_decode_kv_tokens" default:"-1"`
	SumPrefillAttn       float64 `parquet:"sum_prefill_attn" default:"-1"`
	NewReqTokens         int64   `parquet:"new_req_tokens" default:"-1"`
	CUDAGraphSize        int32   `parquet:"cuda_graph_size" default:"-1"`
	PayloadBytes         int64   `parquet:"payload_bytes"`
	PayloadNewBytes      int64   `parquet:"payload_new_bytes"`
	TScheduleStart       int64   `parquet:"t_schedule_start"`
	TScheduleEnd         int64   `parquet:"t_schedule_end"`
	TDispatch            int64   `parquet:"t_dispatch"`
	TOutput              int64   `parquet:"t_output"`
	WallTimeNs           int64   `parquet:"wall_time_ns"`
	NarrowTimeNs         int64   `parquet:"narrow_time_ns"`
	GPUTimeNs            int64   `parquet:"gpu_time_ns"`
	HostPrepNs           int64   `parquet:"host_prep_ns"`
	WorkerRecvNs         int64   `parquet:"worker_recv_ns" default:"-1"`
}

// step is the steps row of st, for features.
func (st *stepCols) step() datasets.Step {
	return datasets.Step{StepID: st.StepID, Kind: st.Kind, NumNewReqs: st.NumNewReqs,
		NumPrefillRequests: st.NumPrefillRequests, SumPrefillTokens: st.SumPrefillTokens, VarPrefillLength: st.VarPrefillLength,
		SumPrefillKVTokens: st.SumPrefillKVTokens, NumDecodeRequests: st.NumDecodeRequests, SumDecodeKVTokens: st.SumDecodeKVTokens,
		VarDecodeKVTokens: st.VarDecodeKVTokens, PaddedTokens: st.PaddedTokens, MaxDecodeKVTokens: st.MaxDecodeKVTokens,
		SumPrefillAttn: st.SumPrefillAttn, NewReqTokens: st.NewReqTokens, CUDAGraphSize: st.CUDAGraphSize, PayloadNewBytes: st.PayloadNewBytes}
}

// StepReplayer re-prices recorded steps with an FPM and the simulated
// executor's host model. It holds the per-worker pipeline state that the
// neighbour-dependent fields need, and allocates nothing per step.
//
// Which fields a step determines by itself, and which depend on its
// neighbours:
//
//   - gpu_time_ns = FPM(features), rounded to ns as SimExecutor does.
//   - host_prep_ns = HostModel.PrepNs(requests, scheduled tokens, new
//     requests, new tokens).
//   - schedule_ns = HostModel.ScheduleNs(requests, new requests), compared
//     with t_schedule_end − t_schedule_start.
//   - narrow_time_ns depends on the previous step under async scheduling
//     (the simulated executor's sim.HostPipeline):
//     the worker's CPU and the GPU may still be busy with it. It is
//     re-derived one step ahead from this step's predicted phases and the
//     recorded events of the steps before it:
//     t_output = max(max(t_schedule_start + schedule, cpu_free) + ship + prep, gpu_free) + gpu + output + OutputReturnNs,
//     where cpu_free is the end of the previous step's input preparation
//     (the recorded chain max(t_dispatch, cpu_free) + worker_recv + host_prep;
//     for a serial worker, the previous step's recorded t_output −
//     OutputReturnNs, when it replied) and gpu_free the previous step's
//     recorded t_output − OutputReturnNs.
//   - wall_time_ns depends on the previous step's t_update_end (the
//     inter-update period). It is the predicted t_output minus the
//     record's own anchor, t_output − wall_time_ns (the previous update's
//     end, or this step's schedule start after idle).
//
// When the record has no event times (an imported FPM table), narrow and
// wall time are predicted as a step that overlaps nothing: schedule + ship +
// prep + gpu + output + OutputReturnNs.
type StepReplayer struct {
	FPM            fpm.FPM
	Host           fpm.HostModel
	OutputReturnNs int64
	// Serial is a worker that ran each step to its end before reading the
	// next (sim.HostPipeline.Serial).
	Serial bool
	// Level is the coverage of the device-time interval when FPM is a
	// fpm.IntervalFPM (0: no interval).
	Level float64

	pipes  []pipeState
	last   int
	approx int64 // steps priced without every feature column
	// extrapolated counts the operations priced past the model's measured
	// range (fpm.Extrapolating).
	extrapolated int64
}

// pipeState is a worker's recorded pipeline: the simulated executor's
// (sim.HostPipeline), advanced by what the record says each step took.
type pipeState struct {
	worker string
	sim.HostPipeline
}

// NewStepReplayer builds a replayer with the simulated executor's output
// return latency.
func NewStepReplayer(fpModel fpm.FPM, host fpm.HostModel) *StepReplayer {
	return &StepReplayer{FPM: fpModel, Host: host, OutputReturnNs: sim.OutputReturnNs}
}

func (r *StepReplayer) pipe(worker string) *pipeState {
	if r.last < len(r.pipes) && r.pipes[r.last].worker == worker {
		return &r.pipes[r.last]
	}
	for i := range r.pipes {
		if r.pipes[i].worker == worker {
			r.last = i
			return &r.pipes[i]
		}
	}
	r.pipes = append(r.pipes, pipeState{worker: worker})
	r.last = len(r.pipes) - 1
	return &r.pipes[r.last]
}

// Price re-prices one step into row (which it overwrites) and returns the
// features it priced: features.Of of the row, whose unknown columns join
// (nil: none) completes from the step's step_requests first.
func (r *StepReplayer) Price(st *stepCols, join *features.RequestJoin, seq int64, row *StepRow) fpm.Features {
	full := st.step()
	join.Complete(&full)
	if !features.Known(&full) {
		r.approx++
	}
	f := features.Of(&full)
	reqs := int(st.NumNewReqs + st.NumCachedReqs)
	newTok := int(f.NewReqTokens)
	sched := r.Host.ScheduleNs(reqs, int(st.NumNewReqs))
	recv := r.Host.ShipNs(st.PayloadBytes)
	prep := r.Host.PrepNs(reqs, int(st.TotalScheduledTokens), int(st.NumNewReqs), newTok)
	output := r.Host.OutputNs(reqs)
	dev, lo, hi := int64(-1), int64(-1), int64(-1)
	if im, ok := r.FPM.(fpm.IntervalFPM); ok && r.Level > 0 {
		mid, l, h := im.PredictIntervalNs(f, r.Level)
		dev, lo, hi = int64(mid+0.5), int64(l+0.5), int64(h+0.5)
	} else if e, ok := r.FPM.(fpm.Extrapolating); ok {
		ns, n := e.PredictExtNs(f)
		dev = int64(ns + 0.5)
		r.extrapolated += int64(n)
	} else {
		dev = int64(r.FPM.PredictNs(f) + 0.5)
	}
	ret := r.OutputReturnNs

	*row = StepRow{Seq: seq, StepID: st.StepID, WorkerID: st.WorkerID, Kind: st.Kind, Role: st.Role,
		BatchSize: int32(reqs), Tokens: st.TotalScheduledTokens, TSchedule: st.TScheduleStart,
		RecGPU: st.GPUTimeNs, PredGPU: dev, RecPrep: st.HostPrepNs, PredPrep: prep,
		RecSched: -1, PredSched: sched, RecNarrow: st.NarrowTimeNs, RecWall: st.WallTimeNs,
		PredGPULo: lo, PredGPUHi: hi, PredWallLo: -1, PredWallHi: -1}
	if st.TScheduleStart >= 0 && st.TScheduleEnd >= 0 {
		row.RecSched = st.TScheduleEnd - st.TScheduleStart
	}
	p := r.pipe(st.WorkerID)
	if st.TScheduleStart >= 0 {
		p.Serial = r.Serial
		pred := p.HostPipeline // this step's phases after the recorded ones
		_, end := pred.Run(pred.Prepare(st.TScheduleStart+sched, recv, prep), dev+output)
		tOut := end + ret
		row.PredNarrow = tOut - st.TScheduleStart
		if st.TOutput >= 0 && st.WallTimeNs >= 0 {
			row.PredWall = tOut - (st.TOutput - st.WallTimeNs)
		} else {
			row.PredWall = row.PredNarrow
		}
		// Advance the recorded chain.
		rr, rp := st.WorkerRecvNs, st.HostPrepNs
		if rr < 0 {
			rr = recv
		}
		if rp < 0 {
			rp = prep
		}
		disp := st.TDispatch
		if disp < 0 {
			disp = st.TScheduleStart + sched
		}
		p.Prepare(disp, rr, rp)
		if st.TOutput >= 0 {
			p.GPUFree = st.TOutput - ret
			if r.Serial {
				p.CPUFree = max(p.CPUFree, p.GPUFree) // the worker read the next step after its reply
			}
		}
	} else {
		row.PredNarrow = sched + recv + prep + dev + output + ret
		row.PredWall = row.PredNarrow
	}
	if lo >= 0 {
		row.PredWallLo, row.PredWallHi = row.PredWall-(dev-lo), row.PredWall+(hi-dev)
	}
	row.ErrGPU, row.RelErrGPU = errOf(row.RecGPU, row.PredGPU)
	row.ErrPrep, row.RelErrPrep = errOf(row.RecPrep, row.PredPrep)
	row.ErrSched, row.RelErrSched = errOf(row.RecSched, row.PredSched)
	row.ErrNarrow, row.RelErrNarrow = errOf(row.RecNarrow, row.PredNarrow)
	row.ErrWall, row.RelErrWall = errOf(row.RecWall, row.PredWall)
	return f
}

// StepOptions tune ReplaySteps.
type StepOptions struct {
	FPM     fpm.FPM
	Host    fpm.HostModel
	Attrib  []string // basis terms the error is attributed to (nil: the model's terms if linear, else fpm.DefaultTerms)
	TopN    int      // steps kept where prediction and record part most (0: 20)
	NoJoin  bool     // ignore step_requests even when present
	TimeBin int      // bins of the over-time series (0: 400)
	// OutputReturnNs overrides the simulated executor's 30 µs.
	OutputReturnNs int64
	// Row, when set, receives every compared row (valid during the call).
	Row func(*StepRow) error
	// Progress, when set, is called every 65,536 steps.
	Progress func(done int64)
	// Level is the coverage of the prediction intervals of a
	// fpm.IntervalFPM (0: the model's own, fpm.LevelOf; negative:
	// none).
	Level float64
}

// ReplaySteps re-prices every step of the dataset's steps table and
// returns the summary; each row goes to opts.Row.
func ReplaySteps(d *datasets.Dataset, opts StepOptions) (*StepSummary, error) {
	if opts.FPM == nil {
		return nil, errors.New("replay steps: no model")
	}
	total, err := tableRows(d, datasets.TableSteps)
	if err != nil {
		return nil, err
	}
	s, err := datasets.Scan[stepCols](d, datasets.TableSteps)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var join *features.RequestJoin
	if !opts.NoJoin {
		if join, err = features.NewRequestJoin(d); err != nil {
			return nil, err
		}
		defer join.Close()
	}
	r := NewStepReplayer(opts.FPM, opts.Host)
	r.Serial = d.Manifest.SerialWorker()
	r.Level = fpm.IntervalLevel(opts.FPM, opts.Level)
	if opts.OutputReturnNs > 0 {
		r.OutputReturnNs = opts.OutputReturnNs
	}
	acc, err := newStepAcc(opts, total)
	if err != nil {
		return nil, err
	}
	acc.level = r.Level
	buf := make([]stepCols, 4096)
	var row StepRow
	var seq int64
	var unknown []string
	for {
		n, err := s.Read(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		for i := range buf[:n] {
			st := &buf[i]
			f := r.Price(st, join, seq, &row)
			if u := f.Unknown(); u != nil {
				unknown = u
				if math.IsNaN(r.FPM.PredictNs(f)) {
					return nil, fmt.Errorf("replay steps: step %d (row %d): the model reads %v, which the dataset records neither as a column nor through step_requests", st.StepID, seq, u)
				}
			}
			acc.add(st, &row, &f)
			if opts.Row != nil {
				if err := opts.Row(&row); err != nil {
					return nil, err
				}
			}
			seq++
			if opts.Progress != nil && seq&0xffff == 0 {
				opts.Progress(seq)
			}
		}
	}
	if err := join.Err(); err != nil {
		return nil, err
	}
	sum := acc.summary()
	sum.UsedStepRequests = join.Used()
	if approx := r.approx; approx > 0 {
		why := "no step_requests table"
		if join.Off() {
			why = "step_requests not joined: step ids repeat (several workers) or are unordered"
		}
		sum.Notes = append(sum.Notes, fmt.Sprintf("%s, and %d steps lack feature columns of the steps table: prefill_attn approximated (Σc·k ≈ T·K/n) when a step has several prefill requests, new_req_tokens = payload_new_bytes/%g", why, approx, features.PayloadBytesPerToken))
	}
	if unknown != nil {
		sum.Notes = append(sum.Notes, fmt.Sprintf("features not recorded: %v (unused by the model)", unknown))
	}
	sum.ExtrapolatedOps = r.extrapolated
	if n := sim.ExtrapolatedNote(r.extrapolated); n != "" {
		sum.Notes = append(sum.Notes, n)
	}
	return sum, nil
}

// tableRows counts a table's rows from the Parquet footers.
func tableRows(d *datasets.Dataset, table string) (int64, error) {
	parts, err := d.Parts(table)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, p := range parts {
		pf, f, err := datasets.OpenParquet(p)
		if err != nil {
			return 0, err
		}
		n += pf.NumRows()
		f.Close()
	}
	return n, nil
}
