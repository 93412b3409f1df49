package replay

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/plot/plotter"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/internal/plotstyle"
)

// Engine curves: where a recorded run has an engine_samples table (its
// engine's running and waiting requests and KV-cache usage over time), a
// request replay compares it with the re-simulated engines' state. The
// simulated state after each step (at its t_update_end) is resampled onto
// the recorded times: the value at a recorded time is the state after the
// last step that ended at or before it, as a stats logger reports the last
// reading of its tick. Before the first step the engine is empty. With
// several engines (a data-parallel run replayed as its ranks) the state is
// every engine's latest, summed (KV usage: blocks used over blocks of all
// engines), as vLLM's logger sums its data-parallel engines; a record with
// samples of several ranks is summed at each sample time likewise.

// CurveError compares one recorded curve with the re-simulated one over
// the recorded samples.
type CurveError struct {
	N int `json:"n"`
	// RecMean and PredMean are the curves' means; MAE is mean |pred − rec|
	// and RelMAE is MAE / RecMean (0 when RecMean is 0); MaxAbs is the
	// largest |pred − rec|. Counts in requests, KV usage as a fraction.
	RecMean  float64 `json:"recorded_mean"`
	PredMean float64 `json:"predicted_mean"`
	MAE      float64 `json:"mae"`
	RelMAE   float64 `json:"rel_mae"`
	MaxAbs   float64 `json:"max_abs_err"`
}

// CurveSummary is the engine-curve comparison of a request replay.
type CurveSummary struct {
	Samples int        `json:"samples"`
	Running CurveError `json:"running"`
	Waiting CurveError `json:"waiting"`
	// KVUsage is absent when the record has no KV usage (kv_usage −1).
	KVUsage *CurveError `json:"kv_usage,omitempty"`
	Notes   []string    `json:"notes,omitempty"`

	rows []CurveRow
}

// CurveRow is one row of a request replay's engine_samples.parquet: a
// recorded sample and the re-simulated state at its time. rec_kv_usage is
// −1 where the record has none.
type CurveRow struct {
	TNs         int64   `parquet:"t_ns,delta"`
	RecRunning  int32   `parquet:"rec_running,delta"`
	PredRunning int32   `parquet:"pred_running,delta"`
	RecWaiting  int32   `parquet:"rec_waiting,delta"`
	PredWaiting int32   `parquet:"pred_waiting,delta"`
	RecKVUsage  float64 `parquet:"rec_kv_usage"`
	PredKVUsage float64 `parquet:"pred_kv_usage"`
}

// simState is the engine's state after one simulated step.
type simState struct {
	t                int64
	running, waiting int32
	kvUsed, kvTotal  int64
}

// curveRecorder collects the simulated states of a replay whose record has
// engine samples. A nil *curveRecorder does nothing.
type curveRecorder struct {
	rec   []datasets.EngineSample
	ranks int
	// states are each engine's states after its steps, the engines
	// indexed by worker id in engine.
	engine map[string]int
	states [][]simState
}

// newCurveRecorder reads d's engine_samples; nil when it has none.
func newCurveRecorder(d *datasets.Dataset) (*curveRecorder, error) {
	if !d.Has(datasets.TableEngineSamples) {
		return nil, nil
	}
	rec, err := datasets.ReadAll[datasets.EngineSample](d, datasets.TableEngineSamples)
	if err != nil {
		return nil, err
	}
	if len(rec) == 0 {
		return nil, nil
	}
	sort.SliceStable(rec, func(i, j int) bool { return rec[i].TNs < rec[j].TNs })
	ranks := map[int32]bool{}
	for _, r := range rec {
		ranks[r.DPRank] = true
	}
	return &curveRecorder{rec: sumRanks(rec, len(ranks)), ranks: len(ranks)}, nil
}

// sumRanks sums the samples of several ranks taken at one time into one
// (KV usage averaged over the ranks that recorded it).
func sumRanks(rec []datasets.EngineSample, ranks int) []datasets.EngineSample {
	if ranks <= 1 {
		return rec
	}
	var out []datasets.EngineSample
	for i := 0; i < len(rec); {
		s := rec[i]
		var kv, nkv float64 // a usage of −1 (not recorded) counts for none
		if s.KVUsage >= 0 {
			kv, nkv = s.KVUsage, 1
		}
		j := i + 1
		for ; j < len(rec) && rec[j].TNs == s.TNs; j++ {
			s.NumRunning += rec[j].NumRunning
			s.NumWaiting += rec[j].NumWaiting
			if rec[j].KVUsage >= 0 {
				kv, nkv = kv+rec[j].KVUsage, nkv+1
			}
		}
		s.DPRank, s.KVUsage = -1, -1
		if nkv > 0 {
			s.KVUsage = kv / nkv
		}
		out = append(out, s)
		i = j
	}
	return out
}

// stepHook is the function the simulation calls after each step of any
// engine.
func (c *curveRecorder) stepHook() func(*datasets.Step) {
	if c == nil {
		return nil
	}
	if c.engine == nil {
		c.engine = map[string]int{}
	}
	return func(st *datasets.Step) {
		i, ok := c.engine[st.WorkerID]
		if !ok {
			i = len(c.states)
			c.engine[st.WorkerID] = i
			c.states = append(c.states, nil)
		}
		c.states[i] = append(c.states[i], simState{t: st.TUpdateEnd, running: st.NumRunning, waiting: st.NumWaiting,
			kvUsed: st.KVBlocksUsed, kvTotal: st.KVBlocksTotal})
	}
}

// compare resamples the simulated states onto the recorded samples.
func (c *curveRecorder) compare() *CurveSummary {
	if c == nil {
		return nil
	}
	s := &CurveSummary{Samples: len(c.rec)}
	if c.ranks > 1 {
		s.Notes = append(s.Notes, fmt.Sprintf("the record has samples of %d data-parallel ranks, summed at each sample time", c.ranks))
	}
	if n := len(c.states); n > 1 {
		s.Notes = append(s.Notes, fmt.Sprintf("the simulated state is the sum over its %d engines", n))
	}
	// An engine records a step when its output is processed, not always
	// in t_update_end order across the pipeline: read each in time order.
	for _, e := range c.states {
		sort.SliceStable(e, func(i, j int) bool { return e[i].t < e[j].t })
	}
	next := make([]int, len(c.states)) // per engine: its states at or before the sample
	var run, wait, kv curveAcc
	for _, r := range c.rec {
		var st simState // the engines' latest states summed; an engine before its first step is empty
		for e, states := range c.states {
			for next[e] < len(states) && states[next[e]].t <= r.TNs {
				next[e]++
			}
			if next[e] > 0 {
				last := &states[next[e]-1]
				st.running += last.running
				st.waiting += last.waiting
				st.kvUsed += last.kvUsed
				st.kvTotal += last.kvTotal
			}
		}
		row := CurveRow{TNs: r.TNs, RecRunning: r.NumRunning, PredRunning: st.running, RecWaiting: r.NumWaiting, PredWaiting: st.waiting,
			RecKVUsage: r.KVUsage}
		if st.kvTotal > 0 {
			row.PredKVUsage = float64(st.kvUsed) / float64(st.kvTotal)
		}
		run.add(float64(r.NumRunning), float64(st.running))
		wait.add(float64(r.NumWaiting), float64(st.waiting))
		if r.KVUsage >= 0 {
			kv.add(r.KVUsage, row.PredKVUsage)
		}
		s.rows = append(s.rows, row)
	}
	s.Running, s.Waiting = run.result(), wait.result()
	if kv.n > 0 {
		k := kv.result()
		s.KVUsage = &k
	} else {
		s.Notes = append(s.Notes, "the record has no KV usage (kv_usage -1): only running and waiting are compared")
	}
	return s
}

type curveAcc struct {
	n                    int
	sumRec, sumPred, abs float64
	maxAbs               float64
}

func (a *curveAcc) add(rec, pred float64) {
	a.n++
	a.sumRec += rec
	a.sumPred += pred
	d := math.Abs(pred - rec)
	a.abs += d
	a.maxAbs = max(a.maxAbs, d)
}

func (a *curveAcc) result() CurveError {
	if a.n == 0 {
		return CurveError{}
	}
	n := float64(a.n)
	e := CurveError{N: a.n, RecMean: a.sumRec / n, PredMean: a.sumPred / n, MAE: a.abs / n, MaxAbs: a.maxAbs}
	if e.RecMean > 0 {
		e.RelMAE = e.MAE / e.RecMean
	}
	return e
}

// writeCurves compares and writes the engine_samples comparison table into
// the replay output w; nil when the record has no engine samples.
func (c *curveRecorder) writeCurves(w *datasets.Writer) (*CurveSummary, error) {
	s := c.compare()
	if s == nil {
		return nil, nil
	}
	tw, err := datasets.NewTableWriter[CurveRow](w, datasets.TableEngineSamples, datasets.DefaultTableOptions)
	if err != nil {
		return nil, err
	}
	if err := tw.Write(s.rows); err != nil {
		return nil, err
	}
	return s, tw.Close()
}

// CurveFigures draws recorded against re-simulated running and waiting
// requests and KV usage over time into dir (engine.running, engine.waiting,
// engine.kv_usage; .png and .svg). It returns the files written.
func CurveFigures(s *CurveSummary, dir string) ([]string, error) {
	if s == nil || len(s.rows) == 0 {
		return nil, nil
	}
	type curve struct {
		name, label string
		rec, pred   func(r *CurveRow) float64
		err         CurveError
	}
	curves := []curve{
		{"engine.running", "running requests", func(r *CurveRow) float64 { return float64(r.RecRunning) },
			func(r *CurveRow) float64 { return float64(r.PredRunning) }, s.Running},
		{"engine.waiting", "waiting requests", func(r *CurveRow) float64 { return float64(r.RecWaiting) },
			func(r *CurveRow) float64 { return float64(r.PredWaiting) }, s.Waiting},
	}
	if s.KVUsage != nil {
		curves = append(curves, curve{"engine.kv_usage", "KV-cache usage (%)", func(r *CurveRow) float64 { return 100 * r.RecKVUsage },
			func(r *CurveRow) float64 { return 100 * r.PredKVUsage }, CurveError{MAE: 100 * s.KVUsage.MAE}})
	}
	var files []string
	for _, c := range curves {
		p := plotstyle.New(fmt.Sprintf("%s: recorded vs re-simulated (mean |error| %.2f)", c.label, c.err.MAE), "time since the first arrival (s)", c.label)
		rec, pred := make(plotter.XYs, 0, len(s.rows)), make(plotter.XYs, 0, len(s.rows))
		for i := range s.rows {
			r := &s.rows[i]
			x := float64(r.TNs) / 1e9
			if v := c.rec(r); v >= 0 {
				rec = append(rec, plotter.XY{X: x, Y: v})
			}
			pred = append(pred, plotter.XY{X: x, Y: c.pred(r)})
		}
		if err := addRecPred(p, rec, pred, "re-simulated"); err != nil {
			return nil, err
		}
		f, err := savePlot(p, dir, c.name)
		if err != nil {
			return nil, err
		}
		files = append(files, f...)
	}
	return files, nil
}
