package replay

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fit"
	"github.com/steplab/steplab/model"
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
	TotalScheduledTokens int64   `parquet:"total_scheduled_tokens"`
	PaddedTokens         int64   `parquet:"padded_tokens"`
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

// stepReqCols is the projection of step_requests step replay reads.
type stepReqCols struct {
	StepID             int64 `parquet:"step_id"`
	IsNew              bool  `parquet:"is_new"`
	IsResumed          bool  `parquet:"is_resumed" default:"false"`
	IsPrefill          bool  `parquet:"is_prefill"`
	NumScheduledTokens int64 `parquet:"num_scheduled_tokens"`
	NumComputedTokens  int64 `parquet:"num_computed_tokens"`
	PromptLen          int64 `parquet:"prompt_len"`
}

// ReqAgg is what step replay takes from a step's step_requests rows: the
// two features the steps table only approximates.
type ReqAgg struct {
	// Known: the step's rows were found.
	Known bool
	// PrefillAttn is Σ over prefill requests of chunk·(computed + chunk/2).
	PrefillAttn float64
	// NewTokens is Σ over new requests of the tokens they ship: prompt_len
	// for a request on its first step; for a resumed request
	// max(prompt_len, computed + scheduled) (its output tokens are not
	// recorded, so this is a lower bound when its recompute is chunked).
	NewTokens float64
}

// FeaturesOfStep maps a steps row to the features the simulator's Compose
// computed for it: fit.FeaturesOf, with PrefillAttn and NewReqTokens taken
// from the per-request rows where step_requests are joined (agg.Known), so
// that replay is exact on simulated data. Without them, PrefillAttn is exact
// when the step has at most one prefill request (else Σc·k ≈ T·K/n) and
// NewReqTokens is payload_new_bytes over the token-id width.
func FeaturesOfStep(st *stepCols, agg *ReqAgg) model.Features {
	f := fit.FeaturesOf(&datasets.Step{Kind: st.Kind, NumNewReqs: st.NumNewReqs,
		NumPrefillRequests: st.NumPrefillRequests, SumPrefillTokens: st.SumPrefillTokens, VarPrefillLength: st.VarPrefillLength,
		SumPrefillKVTokens: st.SumPrefillKVTokens, NumDecodeRequests: st.NumDecodeRequests, SumDecodeKVTokens: st.SumDecodeKVTokens,
		PaddedTokens: st.PaddedTokens, PayloadNewBytes: st.PayloadNewBytes})
	if agg != nil && agg.Known {
		f.PrefillAttn = agg.PrefillAttn
		f.NewReqTokens = agg.NewTokens
	}
	return f
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
//   - narrow_time_ns depends on the previous step under async scheduling:
//     the worker's CPU and the GPU may still be busy with it. It is
//     re-derived one step ahead from this step's predicted phases and the
//     recorded events of the steps before it:
//     t_output = max(max(t_schedule_start + schedule, cpu_free) + ship + prep, gpu_free) + gpu + OutputReturnNs,
//     where cpu_free is the end of the previous step's input preparation
//     (the recorded chain max(t_dispatch, cpu_free) + worker_recv + host_prep)
//     and gpu_free the previous step's recorded t_output − OutputReturnNs.
//   - wall_time_ns depends on the previous step's t_update_end (the
//     inter-update period). It is the predicted t_output minus the
//     record's own anchor, t_output − wall_time_ns (the previous update's
//     end, or this step's schedule start after idle).
//
// When the record has no event times (an imported FPM table), narrow and
// wall time are predicted as a step that overlaps nothing: schedule + ship +
// prep + gpu + OutputReturnNs.
type StepReplayer struct {
	FPM            model.FPM
	Host           model.HostModel
	OutputReturnNs int64
	// Level is the coverage of the device-time interval when FPM is a
	// model.IntervalFPM (0: no interval).
	Level float64

	pipes []pipeState
	last  int
}

type pipeState struct {
	worker           string
	cpuFree, gpuFree int64
}

// NewStepReplayer builds a replayer with the simulated executor's output
// return latency.
func NewStepReplayer(fpm model.FPM, host model.HostModel) *StepReplayer {
	return &StepReplayer{FPM: fpm, Host: host, OutputReturnNs: 30_000}
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
// features it priced.
func (r *StepReplayer) Price(st *stepCols, agg *ReqAgg, seq int64, row *StepRow) model.Features {
	f := FeaturesOfStep(st, agg)
	reqs := int(st.NumNewReqs + st.NumCachedReqs)
	newTok := int(f.NewReqTokens)
	sched := r.Host.ScheduleNs(reqs, int(st.NumNewReqs))
	recv := r.Host.ShipNs(st.PayloadBytes)
	prep := r.Host.PrepNs(reqs, int(st.TotalScheduledTokens), int(st.NumNewReqs), newTok)
	dev, lo, hi := int64(-1), int64(-1), int64(-1)
	if im, ok := r.FPM.(model.IntervalFPM); ok && r.Level > 0 {
		mid, l, h := im.PredictIntervalNs(f, r.Level)
		dev, lo, hi = int64(mid+0.5), int64(l+0.5), int64(h+0.5)
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
		start := max(st.TScheduleStart+sched, p.cpuFree)
		tOut := max(start+recv+prep, p.gpuFree) + dev + ret
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
		p.cpuFree = max(disp, p.cpuFree) + rr + rp
		if st.TOutput >= 0 {
			p.gpuFree = st.TOutput - ret
		}
	} else {
		row.PredNarrow = sched + recv + prep + dev + ret
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

// reqJoin streams step_requests alongside steps (both in step order) and
// aggregates each step's rows.
type reqJoin struct {
	s    *datasets.Scanner[stepReqCols]
	buf  []stepReqCols
	i, n int
	eof  bool
	last int64
	off  bool // the join broke (step ids not increasing): stop using it
	err  error
}

func newReqJoin(d *datasets.Dataset) (*reqJoin, error) {
	if !d.Has(datasets.TableStepRequests) {
		return nil, nil
	}
	s, err := datasets.Scan[stepReqCols](d, datasets.TableStepRequests)
	if err != nil {
		return nil, err
	}
	return &reqJoin{s: s, buf: make([]stepReqCols, 8192), last: math.MinInt64}, nil
}

func (j *reqJoin) fill() bool {
	if j.i < j.n {
		return true
	}
	if j.eof {
		return false
	}
	n, err := j.s.Read(j.buf)
	if err == io.EOF {
		j.eof = true
		return false
	}
	if err != nil {
		j.err, j.eof = err, true
		return false
	}
	j.i, j.n = 0, n
	return true
}

// agg aggregates the rows of stepID into a; it leaves a unknown when the
// join is off or the step has no rows.
func (j *reqJoin) agg(stepID int64, a *ReqAgg) {
	*a = ReqAgg{}
	if j == nil || j.off {
		return
	}
	if stepID <= j.last {
		j.off = true // several workers or unordered steps: ids repeat
		return
	}
	j.last = stepID
	for j.fill() && j.buf[j.i].StepID < stepID {
		j.i++
	}
	for j.fill() && j.buf[j.i].StepID == stepID {
		r := &j.buf[j.i]
		a.Known = true
		if r.IsPrefill {
			c, k := float64(r.NumScheduledTokens), float64(r.NumComputedTokens)
			a.PrefillAttn += c * (k + c/2)
		}
		if r.IsNew {
			t := r.PromptLen
			if r.IsResumed {
				t = max(t, r.NumComputedTokens+r.NumScheduledTokens)
			}
			a.NewTokens += float64(t)
		}
		j.i++
	}
}

func (j *reqJoin) close() {
	if j != nil {
		j.s.Close()
	}
}

// StepOptions tune ReplaySteps.
type StepOptions struct {
	FPM     model.FPM
	Host    model.HostModel
	Attrib  []string // basis terms the error is attributed to (nil: the model's terms if linear, else model.DefaultTerms)
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
	// model.IntervalFPM (0: the model's own, model.LevelOf; negative:
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
	var join *reqJoin
	if !opts.NoJoin {
		if join, err = newReqJoin(d); err != nil {
			return nil, err
		}
		defer join.close()
	}
	r := NewStepReplayer(opts.FPM, opts.Host)
	r.Level = model.IntervalLevel(opts.FPM, opts.Level)
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
	var agg ReqAgg
	var seq int64
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
			join.agg(st.StepID, &agg)
			f := r.Price(st, &agg, seq, &row)
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
	if join != nil && join.err != nil {
		return nil, join.err
	}
	sum := acc.summary()
	sum.UsedStepRequests = join != nil && !join.off && join.last != math.MinInt64
	if join != nil && join.off {
		sum.Notes = append(sum.Notes, "step_requests not used: step ids repeat (several workers) or are unordered; prefill_attn approximated from the steps table")
	} else if join == nil {
		sum.Notes = append(sum.Notes, "no step_requests table: prefill_attn approximated (Σc·k ≈ T·K/n) when a step has several prefill requests; new_req_tokens = payload_new_bytes/3.75")
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

func fmtNs(ns float64) string {
	switch a := math.Abs(ns); {
	case a >= 1e9:
		return fmt.Sprintf("%.3g s", ns/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.3g ms", ns/1e6)
	case a >= 1e3:
		return fmt.Sprintf("%.3g µs", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}
