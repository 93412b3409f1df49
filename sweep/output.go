package sweep

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/steplab/steplab/internal/plotstyle"
	"github.com/steplab/steplab/planner"
	"github.com/steplab/steplab/replay"
)

// Files Write creates.
const (
	TableFile  = "sweep.parquet"
	JSONFile   = "sweep.json"
	Throughput = "throughput" // .png and .svg
	LatencyP90 = "latency_p90"
)

// Row is a sweep table row without its varied columns, which come first.
type Row struct {
	Point     int32  `parquet:"point"`
	Placement string `parquet:"placement"`
	Rep       int32  `parquet:"rep"`
	// Seed of the point's scenario; RepSeed of the repetition's stream.
	Seed                uint64  `parquet:"seed"`
	RepSeed             uint64  `parquet:"rep_seed"`
	Load                string  `parquet:"load"`
	OfferedRPS          float64 `parquet:"offered_rps"`
	Measured            int32   `parquet:"measured"`
	Valid               int32   `parquet:"valid"`
	Errors              int32   `parquet:"errors"`
	Cancelled           int32   `parquet:"cancelled"`
	WindowRPS           float64 `parquet:"window_rps"`
	AchievedOverOffered float64 `parquet:"achieved_over_offered"`
	FullProcessRPS      float64 `parquet:"full_process_rps"`
	E2EMeanMs           float64 `parquet:"e2e_mean_ms"`
	E2EP50Ms            float64 `parquet:"e2e_p50_ms"`
	E2EP90Ms            float64 `parquet:"e2e_p90_ms"`
	E2EP99Ms            float64 `parquet:"e2e_p99_ms"`
	// GPUs of the engine stages; goodput (requests meeting the SLO per
	// second of the request window) and it per GPU, null without an SLO
	// (goodput counts nothing then: set slo.ttft_ms and slo.itl_ms).
	GPUs          int32    `parquet:"gpus"`
	GoodputRPS    *float64 `parquet:"goodput_rps,optional"`
	GoodputPerGPU *float64 `parquet:"goodput_per_gpu_rps,optional"`
}

// SimRow is a simulate sweep's row: one per point, the simulate report.
type SimRow struct {
	Point              int32   `parquet:"point"`
	Seed               uint64  `parquet:"seed"`
	Requests           int64   `parquet:"requests"`
	Finished           int64   `parquet:"finished"`
	Unfinished         int64   `parquet:"unfinished"`
	Rejected           int64   `parquet:"rejected"`
	Preemptions        int64   `parquet:"preemptions"`
	DurationS          float64 `parquet:"duration_s"`
	RequestsPerS       float64 `parquet:"throughput_rps"`
	OutputTokensPerS   float64 `parquet:"output_tokens_per_s"`
	TTFTMeanMs         float64 `parquet:"ttft_mean_ms"`
	TTFTP50Ms          float64 `parquet:"ttft_p50_ms"`
	TTFTP90Ms          float64 `parquet:"ttft_p90_ms"`
	TTFTP99Ms          float64 `parquet:"ttft_p99_ms"`
	ITLMeanMs          float64 `parquet:"itl_mean_ms"`
	ITLP50Ms           float64 `parquet:"itl_p50_ms"`
	ITLP90Ms           float64 `parquet:"itl_p90_ms"`
	ITLP99Ms           float64 `parquet:"itl_p99_ms"`
	E2EMeanMs          float64 `parquet:"e2e_mean_ms"`
	E2EP50Ms           float64 `parquet:"e2e_p50_ms"`
	E2EP90Ms           float64 `parquet:"e2e_p90_ms"`
	E2EP99Ms           float64 `parquet:"e2e_p99_ms"`
	PrefixCacheHitRate float64 `parquet:"prefix_cache_hit_rate"`
	GPUs               int32   `parquet:"gpus"`
	Engines            int32   `parquet:"engines"`
}

// CalibRow is a calibrate sweep's row: one per point and scored split
// (start, train, holdout), the relative error of each request metric.
type CalibRow struct {
	Point     int32   `parquet:"point"`
	Split     string  `parquet:"split"`
	Dataset   string  `parquet:"dataset"`
	Requests  int32   `parquet:"requests"`
	Objective float64 `parquet:"objective"`
	Evals     int32   `parquet:"evaluations"`
	TTFTMean  float64 `parquet:"rel_err_ttft_mean"`
	TTFTP50   float64 `parquet:"rel_err_ttft_p50"`
	TTFTP90   float64 `parquet:"rel_err_ttft_p90"`
	ITLMean   float64 `parquet:"rel_err_itl_mean"`
	ITLP50    float64 `parquet:"rel_err_itl_p50"`
	ITLP90    float64 `parquet:"rel_err_itl_p90"`
	E2EMean   float64 `parquet:"rel_err_e2e_mean"`
}

// PlanRow is a plan's row: one per candidate, its exclusion or its
// goodput and what it costs (package planner's Candidate).
type PlanRow struct {
	Point            int32   `parquet:"point"`
	Seed             uint64  `parquet:"seed"`
	Layout           string  `parquet:"layout"`
	GPUs             int32   `parquet:"gpus"`
	CostPerHour      float64 `parquet:"cost_per_hour"`
	Pruned           string  `parquet:"pruned"`
	Reason           string  `parquet:"reason"`
	TTFTZeroLoadMs   float64 `parquet:"ttft_zero_load_ms"`
	ITLBatch1Ms      float64 `parquet:"itl_batch1_ms"`
	BoundRPS         float64 `parquet:"bound_rps"`
	Simulations      int32   `parquet:"simulations"`
	GoodputRPS       float64 `parquet:"goodput_rps"`
	GoodputPerGPU    float64 `parquet:"goodput_per_gpu_rps"`
	TokensPerSPerGPU float64 `parquet:"output_tokens_per_s_per_gpu"`
	CostPerMTokens   float64 `parquet:"cost_per_million_output_tokens"`
	TTFTMs           float64 `parquet:"ttft_ms"`
	ITLMs            float64 `parquet:"itl_ms"`
	E2EMs            float64 `parquet:"e2e_ms"`
	MeetsTarget      bool    `parquet:"meets_target"`
}

// table is the rows of the result's kind and their type.
func (r *Result) table() (reflect.Type, []any) {
	var rows []any
	switch r.kind() {
	case KindPlan:
		for _, p := range r.Points {
			c := p.Plan
			row := PlanRow{Point: int32(p.Index), Seed: p.Seed, Layout: c.Config.Layout(), GPUs: int32(c.GPUs), CostPerHour: c.CostPerHour,
				Pruned: c.Pruned, Reason: c.Reason, Simulations: int32(c.Simulations), GoodputRPS: c.GoodputRPS,
				GoodputPerGPU: c.GoodputPerGPU, TokensPerSPerGPU: c.TokensPerSPerGPU, CostPerMTokens: c.CostPerMTokens,
				TTFTMs: c.TTFTMs, ITLMs: c.ITLMs, E2EMs: c.E2EMs, MeetsTarget: c.MeetsTarget}
			if b := c.Bounds; b != nil {
				row.TTFTZeroLoadMs, row.ITLBatch1Ms, row.BoundRPS = b.TTFTZeroLoadMs, b.ITLBatch1Ms, b.MaxRPS
			}
			rows = append(rows, row)
		}
		return reflect.TypeFor[PlanRow](), rows
	case KindSimulate:
		for _, p := range r.Points {
			s := p.Simulate
			rows = append(rows, SimRow{Point: int32(p.Index), Seed: p.Seed, Requests: s.Requests, Finished: s.Finished,
				Unfinished: s.Unfinished, Rejected: s.Rejected, Preemptions: s.Preemptions, DurationS: s.DurationS,
				RequestsPerS: s.RequestsPerS, OutputTokensPerS: s.OutputTokensPerS,
				TTFTMeanMs: s.TTFT.Mean, TTFTP50Ms: s.TTFT.P50, TTFTP90Ms: s.TTFT.P90, TTFTP99Ms: s.TTFT.P99,
				ITLMeanMs: s.ITL.Mean, ITLP50Ms: s.ITL.P50, ITLP90Ms: s.ITL.P90, ITLP99Ms: s.ITL.P99,
				E2EMeanMs: s.E2E.Mean, E2EP50Ms: s.E2E.P50, E2EP90Ms: s.E2E.P90, E2EP99Ms: s.E2E.P99,
				PrefixCacheHitRate: s.PrefixCacheHitRate, GPUs: int32(s.GPUs), Engines: int32(s.Engines)})
		}
		return reflect.TypeFor[SimRow](), rows
	case KindCalibrate:
		for _, p := range r.Points {
			c := p.Calibrate
			var all []replay.MetricErrors
			for _, m := range c.Before {
				m.Split = "start"
				all = append(all, m)
			}
			for _, m := range append(append(all, c.Train...), c.Holdout...) {
				e := m.RelErr
				rows = append(rows, CalibRow{Point: int32(p.Index), Split: m.Split, Dataset: m.Dataset, Requests: int32(m.Requests),
					Objective: c.Objective, Evals: int32(c.Evals), TTFTMean: e["ttft_mean"], TTFTP50: e["ttft_p50"],
					TTFTP90: e["ttft_p90"], ITLMean: e["itl_mean"], ITLP50: e["itl_p50"], ITLP90: e["itl_p90"], E2EMean: e["e2e_mean"]})
			}
		}
		return reflect.TypeFor[CalibRow](), rows
	}
	for _, row := range r.Rows() {
		rows = append(rows, row)
	}
	return reflect.TypeFor[Row](), rows
}

// Candidates are a plan's candidates in point order.
func (r *Result) Candidates() []*planner.Candidate {
	var cs []*planner.Candidate
	for _, p := range r.Points {
		cs = append(cs, p.Plan)
	}
	return cs
}

// NumRows is the number of table rows the result has.
func (r *Result) NumRows() int {
	_, rows := r.table()
	return len(rows)
}

// Rows flattens a what-if result: point × placement × repetition.
func (r *Result) Rows() []Row {
	var rows []Row
	for _, p := range r.Points {
		if p.Audit == nil {
			continue
		}
		for _, pl := range p.Audit.Placements {
			for _, run := range pl.Runs {
				ao := 0.0
				if p.Audit.OfferedRPS > 0 {
					ao = run.WindowRPS / p.Audit.OfferedRPS
				}
				row := Row{Point: int32(p.Index), Placement: pl.Placement, Rep: int32(run.Rep), Seed: p.Seed,
					RepSeed: run.Seed, Load: p.Audit.Load, OfferedRPS: p.Audit.OfferedRPS, Measured: int32(run.Measured),
					Valid: int32(run.Valid), Errors: int32(run.Errors), Cancelled: int32(run.Cancelled), WindowRPS: run.WindowRPS,
					AchievedOverOffered: ao, FullProcessRPS: run.FullProcessRPS, E2EMeanMs: run.E2E.MeanMs,
					E2EP50Ms: run.E2E.P50Ms, E2EP90Ms: run.E2E.P90Ms, E2EP99Ms: run.E2E.P99Ms, GPUs: int32(p.Audit.GPUs)}
				if p.Audit.SLO != nil {
					g, pg := run.GoodputRPS, perGPU(run.GoodputRPS, p.Audit.GPUs)
					row.GoodputRPS, row.GoodputPerGPU = &g, &pg
				}
				rows = append(rows, row)
			}
		}
	}
	return rows
}

func perGPU(rps float64, gpus int) float64 {
	if gpus == 0 {
		return 0
	}
	return rps / float64(gpus)
}

// rowType is the kind's row type with the varied columns in front: a
// float64 column for a key whose values are all numbers, a string column
// otherwise. The column is named by the key.
func rowType(vary []Vary, base reflect.Type) reflect.Type {
	var fields []reflect.StructField
	for i, v := range vary {
		t := reflect.TypeFor[string]()
		if numeric(v) {
			t = reflect.TypeFor[float64]()
		}
		fields = append(fields, reflect.StructField{Name: "V" + strconv.Itoa(i), Type: t,
			Tag: reflect.StructTag(`parquet:"` + v.Key + `"`)})
	}
	fields = append(fields, reflect.StructField{Name: "Row", Type: base, Anonymous: true})
	return reflect.StructOf(fields)
}

// WriteTable writes the sweep's Parquet table (zstd) to path.
func WriteTable(path string, r *Result) error {
	if err := checkKeys(r.Vary); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeRows(f, r, parquet.Compression(&zstd.Codec{})); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func checkKeys(vary []Vary) error {
	for _, v := range vary {
		if strings.ContainsAny(v.Key, ",\"`") {
			return fmt.Errorf("sweep: key %q cannot name a column", v.Key)
		}
	}
	return nil
}

// writeRows writes the table of WriteTable and WriteRows, which differ only
// in opts (compression, page size, metadata).
func writeRows(w io.Writer, r *Result, opts ...parquet.WriterOption) error {
	base, rows := r.table()
	t := rowType(r.Vary, base)
	bw := bufio.NewWriter(w)
	pw := parquet.NewWriter(bw, append([]parquet.WriterOption{parquet.SchemaOf(reflect.New(t).Interface())}, opts...)...)
	pointRow := map[int32][]string{}
	for _, p := range r.Points {
		pointRow[int32(p.Index)] = p.Values
	}
	for _, row := range rows {
		v := reflect.New(t).Elem()
		point := int32(reflect.ValueOf(row).FieldByName("Point").Int())
		for i, x := range pointRow[point] {
			f := v.Field(i)
			if f.Kind() == reflect.Float64 {
				n, _ := strconv.ParseFloat(x, 64)
				f.SetFloat(n)
			} else {
				f.SetString(x)
			}
		}
		v.Field(len(r.Vary)).Set(reflect.ValueOf(row))
		if err := pw.Write(v.Addr().Interface()); err != nil {
			return err
		}
	}
	if err := pw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// Write stores sweep.parquet, sweep.json (every point's result) and, for
// a what-if sweep, the figures in dir; for a plan, its summary, frontier
// figures and chosen launch settings (planner.Write).
func Write(dir string, r *Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := WriteTable(filepath.Join(dir, TableFile), r); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, JSONFile), append(b, '\n'), 0o644); err != nil {
		return err
	}
	switch r.kind() {
	case KindWhatif:
		return Figures(dir, r)
	case KindPlan:
		return planner.Write(dir, r.Scenario, r.Candidates())
	}
	return nil
}

// series is one line of a figure: a placement and the values of the
// varied keys other than the x axis.
type series struct {
	label string
	// placement is the placement's index in the scenario (its colour);
	// variant numbers the values of the other varied keys (its dashes).
	placement, variant int
	x, y               []float64
}

// xAxis picks the figure's x: the offered rate of an open loop, else
// (closed loop) the number of users.
func xAxis(r *Result) (name string, x func(p PointResult) float64) {
	if len(r.Points) > 0 && r.Points[0].Audit.OfferedRPS == 0 {
		return "closed-loop users", func(p PointResult) float64 { return float64(p.Audit.Users) }
	}
	return "offered load (req/s)", func(p PointResult) float64 { return p.Audit.OfferedRPS }
}

func lines(r *Result, y func(pa PointResult, placement int) float64) []series {
	_, xf := xAxis(r)
	var out []series
	index, variants := map[string]int{}, map[string]int{}
	for _, p := range r.Points {
		var other []string
		for k, v := range r.Vary {
			if v.Key != "load.rate_rps" && v.Key != "load.users" {
				other = append(other, v.Key+"="+p.Values[k])
			}
		}
		variant := strings.Join(other, ", ")
		if _, ok := variants[variant]; !ok {
			variants[variant] = len(variants)
		}
		for i, pl := range p.Audit.Placements {
			label := pl.Placement
			if variant != "" {
				label += " (" + variant + ")"
			}
			k, ok := index[label]
			if !ok {
				k = len(out)
				index[label] = k
				out = append(out, series{label: label, placement: i, variant: variants[variant]})
			}
			out[k].x = append(out[k].x, xf(p))
			out[k].y = append(out[k].y, y(p, i))
		}
	}
	for i := range out { // sort each line by x, stably
		s := &out[i]
		idx := make([]int, len(s.x))
		for j := range idx {
			idx[j] = j
		}
		slices.SortStableFunc(idx, func(a, b int) int {
			switch {
			case s.x[a] < s.x[b]:
				return -1
			case s.x[a] > s.x[b]:
				return 1
			}
			return 0
		})
		x, yy := make([]float64, len(idx)), make([]float64, len(idx))
		for j, k := range idx {
			x[j], yy[j] = s.x[k], s.y[k]
		}
		s.x, s.y = x, yy
	}
	return out
}

// figure draws one line per series, in its placement's colour (as the
// report's what-if figures), dashed by the other varied keys' values.
func figure(path, title, ylabel string, r *Result, ls []series, diagonal bool) error {
	xname, _ := xAxis(r)
	f := plotstyle.New(title, xname, ylabel)
	for _, s := range ls {
		xy := make(plotter.XYs, len(s.x))
		for i := range s.x {
			xy[i].X, xy[i].Y = s.x[i], s.y[i]
		}
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		l.Color, pts.Color = plotstyle.Placement(s.placement), plotstyle.Placement(s.placement)
		l.Dashes, l.Width = plotstyle.Dashes(s.variant), vg.Points(1.5)
		pts.Shape, pts.Radius = draw.CircleGlyph{}, vg.Points(2.5)
		f.Add(l, pts)
		f.AddLegend(s.label, l, pts)
	}
	if diagonal && len(ls) > 0 && xname == "offered load (req/s)" {
		lo, hi := slices.Min(ls[0].x), slices.Max(ls[0].x)
		for _, s := range ls {
			lo, hi = min(lo, slices.Min(s.x)), max(hi, slices.Max(s.x))
		}
		l, err := plotter.NewLine(plotter.XYs{{X: lo, Y: lo}, {X: hi, Y: hi}})
		if err != nil {
			return err
		}
		l.Color, l.Dashes = plotstyle.Reference, plotstyle.Dashes(1)
		f.Add(l)
		f.AddLegend("achieved = offered", l)
	}
	for _, ext := range []string{".png", ".svg"} {
		if err := f.Save(7*vg.Inch, 5*vg.Inch, path+ext); err != nil {
			return err
		}
	}
	return nil
}

// Figures draws mean request-window throughput and mean p90 end-to-end
// latency against the offered load, one line per placement (and per value
// of any other varied key).
func Figures(dir string, r *Result) error {
	tp := lines(r, func(p PointResult, i int) float64 { return p.Audit.Placements[i].WindowMeanRPS })
	if err := figure(filepath.Join(dir, Throughput), r.Scenario+": request-window throughput (mean of repetitions)",
		"throughput (req/s)", r, tp, true); err != nil {
		return err
	}
	lat := lines(r, func(p PointResult, i int) float64 {
		runs := p.Audit.Placements[i].Runs
		s := 0.0
		for _, run := range runs {
			s += run.E2E.P90Ms
		}
		return s / float64(max(1, len(runs)))
	})
	return figure(filepath.Join(dir, LatencyP90), r.Scenario+": p90 end-to-end latency (mean of repetitions)",
		"p90 latency (ms)", r, lat, false)
}
