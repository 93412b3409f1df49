package importers

import (
	"bytes"
	"errors"
	"io/fs"
	"math"
	"sort"
	"strconv"

	"github.com/steplab/steplab/datasets"
)

// timeseries.csv columns (LLMServingSim bench/core/stat_logger.py,
// BenchStatLogger.downsample_to_csv_rows, read at 5daddb21). The logger
// records vLLM's SchedulerStats at every engine iteration and buckets them
// into ticks of meta.json's tick_seconds: t is the end of a tick in seconds
// since the logger was created; running and waiting are the last reading of
// each data-parallel engine in the tick, summed over engines; kv_cache_pct
// is their kv_cache_usage × 100, averaged over engines; the throughputs are
// the prompt and generated tokens of the tick's iterations, summed over
// engines, per second. Ticks without an iteration have no row.
const (
	tsColT       = "t"
	tsColRunning = "running"
	tsColWaiting = "waiting"
	tsColKV      = "kv_cache_pct"
	tsColPrompt  = "prompt_throughput"
	tsColGen     = "gen_throughput"
)

type tsRow struct {
	t                float64 // seconds on the logger's clock
	running, waiting int32
	kv, prompt, gen  float64 // -1 when the column is absent
	line             int
}

// readVLLMTimeseries reads timeseries.csv beside requests.jsonl, when there
// is one, into the engine_samples table, on the requests' clock. reqs are
// the requests with ArrivalNs at their queued_ts: vLLM's waiting count is
// its scheduler's queue, which a request joins when it is queued.
//
// Clock. t counts from the logger's creation, a moment the run does not
// record, so the offset to the requests' clock is estimated: the requests
// themselves say how many were waiting (queued, not yet scheduled) and
// running (scheduled, not finished) at any time, and the offset is the one
// that best matches those counts to the logged ones (least absolute
// difference over every row, searched to the millisecond). The offset and
// the remaining mismatch are noted; the mismatch is what the request times
// cannot see (preempted requests back in the waiting queue, the logger's
// reading taken before the tick's end).
//
// KV usage. A column of zeros while requests run cannot be a reading (every
// running request holds a block): the logger did not record it, and
// kv_usage is -1 (unknown) for the file.
func readVLLMTimeseries(in *input, s *sink, reqs []datasets.Request, meta *vllmMeta) error {
	const name = "timeseries.csv"
	b, err := in.sibling(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	rows, err := parseTimeseries(name, b)
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		s.note("%s has no rows: no engine_samples", name)
		return nil
	}
	window := int64(0)
	if meta != nil && meta.TickSeconds != nil {
		if w, ok := secondsToNs(*meta.TickSeconds); ok && w > 0 {
			window = w
		}
	}
	kvRecorded := rows[0].kv >= 0
	for _, r := range rows {
		if r.running > 0 && r.kv == 0 {
			kvRecorded = false
			break
		}
	}
	rank := int32(0)
	if s.m.Engine != nil && s.m.Engine.DataParallelSize > 1 {
		rank = -1
	}

	ts := make([]int64, len(rows))
	for i, r := range rows {
		v, ok := secondsToNs(r.t)
		if !ok {
			return lineError(name, r.line, "%s: %v is not a time in seconds", tsColT, r.t)
		}
		ts[i] = v
	}
	al := alignSamples(ts, rows, newQueueCounts(reqs))
	dropped := 0
	for i, r := range rows {
		t := ts[i] + al.offsetNs
		if t < 0 {
			dropped++
			continue
		}
		es := datasets.EngineSample{TNs: t, DPRank: rank, NumRunning: r.running, NumWaiting: r.waiting,
			KVUsage: -1, PromptTokensPerS: r.prompt, GenerationTokensPerS: r.gen, WindowNs: window}
		if kvRecorded {
			es.KVUsage = min(1, r.kv/100)
		}
		if err := s.addSample(es); err != nil {
			return err
		}
	}
	s.detail("timeseries_offset_s", strconv.FormatFloat(float64(al.offsetNs)/1e9, 'f', 3, 64))
	s.note("engine_samples from %s: t_ns = t %+.3f s, the offset from the stats logger's clock to the requests' that best matches its running and waiting counts to the ones the request times imply (mean |difference| after alignment: running %.2f, waiting %.2f requests)",
		name, float64(al.offsetNs)/1e9, al.meanAbsRunning, al.meanAbsWaiting)
	if window > 0 {
		s.note("engine_samples: each row is the last reading of a %g s tick ending at t_ns; throughputs are averages over the tick", float64(window)/1e9)
	}
	if rank < 0 {
		s.note("engine_samples: summed over the %d data-parallel engines (dp_rank -1); kv_usage is their average", s.m.Engine.DataParallelSize)
	}
	if !kvRecorded {
		s.note("engine_samples: %s is 0 while requests run, or absent: KV usage was not recorded (kv_usage -1)", tsColKV)
	}
	if dropped > 0 {
		s.note("engine_samples: %d rows before the first request dropped", dropped)
	}
	return nil
}

// parseTimeseries reads the CSV: a header naming at least t, running and
// waiting (any order; other columns ignored), then rows in time order.
func parseTimeseries(name string, b []byte) ([]tsRow, error) {
	c, err := newCSVRows(name, bytes.NewReader(b), tsColT, tsColRunning, tsColWaiting)
	if err != nil {
		return nil, err
	}
	var rows []tsRow
	for c.scan() {
		line, field := c.line, c.field
		r := tsRow{line: line, kv: -1, prompt: -1, gen: -1}
		for _, f := range []struct {
			c    string
			dst  *float64
			max  float64
			want string
		}{{tsColT, &r.t, 9e9, "a time in seconds"}, {tsColKV, &r.kv, 100, "a percentage in [0, 100]"},
			{tsColPrompt, &r.prompt, 1e12, "a token rate"}, {tsColGen, &r.gen, 1e12, "a token rate"}} {
			v, ok, err := field(f.c)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || !(x >= 0 && x <= f.max) {
				return nil, lineError(name, line, "%s: %q is not %s", f.c, v, f.want)
			}
			*f.dst = x
		}
		for _, f := range []struct {
			c   string
			dst *int32
		}{{tsColRunning, &r.running}, {tsColWaiting, &r.waiting}} {
			v, _, err := field(f.c)
			if err != nil {
				return nil, err
			}
			n, err := parseCount(v)
			if err != nil || n > math.MaxInt32 {
				return nil, lineError(name, line, "%s: %q is not a request count", f.c, v)
			}
			*f.dst = int32(n)
		}
		if len(rows) > 0 && r.t < rows[len(rows)-1].t {
			return nil, lineError(name, line, "%s: %v is earlier than the previous row's %v; rows must be in time order", tsColT, r.t, rows[len(rows)-1].t)
		}
		rows = append(rows, r)
	}
	if c.err != nil {
		return nil, c.err
	}
	return rows, nil
}

// queueCounts answers how many requests were waiting and running at a time,
// from their queued, first-scheduled and finish times (sorted; a time the
// request never reached is absent).
type queueCounts struct{ queued, scheduled, finished []int64 }

func newQueueCounts(reqs []datasets.Request) *queueCounts {
	q := &queueCounts{}
	for _, r := range reqs {
		q.queued = append(q.queued, r.ArrivalNs)
		if r.FirstScheduledNs >= 0 {
			q.scheduled = append(q.scheduled, r.FirstScheduledNs)
		}
		if r.FinishNs >= 0 {
			q.finished = append(q.finished, r.FinishNs)
		}
	}
	for _, s := range [][]int64{q.queued, q.scheduled, q.finished} {
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	}
	return q
}

// atOrBefore counts the times in sorted s that are <= t.
func atOrBefore(s []int64, t int64) int {
	return sort.Search(len(s), func(i int) bool { return s[i] > t })
}

func (q *queueCounts) at(t int64) (running, waiting int) {
	sch := atOrBefore(q.scheduled, t)
	return sch - atOrBefore(q.finished, t), atOrBefore(q.queued, t) - sch
}

// alignment is the clock offset found by alignSamples and how well the
// counts agree after it.
type alignment struct {
	offsetNs                       int64
	meanAbsRunning, meanAbsWaiting float64
}

// alignSamples finds the offset c (ns) that minimises, over the rows,
// |running − R(t+c)| + |waiting − W(t+c)|, where R and W are the running
// and waiting counts the requests imply. The search is a grid over every
// offset that puts a row within the requests' span, refined tenfold around
// the best point down to 1 ms; the first best offset wins, so the result is
// deterministic. The coarse pass uses at most 512 rows, evenly spread.
func alignSamples(ts []int64, rows []tsRow, q *queueCounts) alignment {
	if len(q.queued) == 0 {
		return alignment{}
	}
	end := q.queued[len(q.queued)-1]
	if n := len(q.finished); n > 0 {
		end = max(end, q.finished[n-1])
	}
	cost := func(c int64, stride int) (float64, float64) {
		var dr, dw float64
		for i := 0; i < len(ts); i += stride {
			r, w := q.at(ts[i] + c)
			dr += math.Abs(float64(rows[i].running) - float64(r))
			dw += math.Abs(float64(rows[i].waiting) - float64(w))
		}
		return dr, dw
	}
	lo, hi := -ts[len(ts)-1], end-ts[0]
	step := max(int64(50_000_000), (hi-lo)/2000)
	stride := max(1, len(ts)/512)
	best, bestCost := lo, math.Inf(1)
	for {
		for c := lo; c <= hi; c += step {
			dr, dw := cost(c, stride)
			if dr+dw < bestCost {
				best, bestCost = c, dr+dw
			}
		}
		if step <= 1_000_000 {
			break
		}
		lo, hi = best-step, best+step
		step = max(1_000_000, step/10)
		stride, bestCost = 1, math.Inf(1)
	}
	dr, dw := cost(best, 1)
	n := float64(len(ts))
	return alignment{offsetNs: best, meanAbsRunning: dr / n, meanAbsWaiting: dw / n}
}
