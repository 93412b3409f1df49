package sweep

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/steplab/steplab/scenario"
	"github.com/steplab/steplab/workflow/whatif"
)

// Hooks for running a sweep elsewhere (package dist): one point at a
// time, by index, with the same compilation, seed and simulation as Run,
// so that gathering the points' results in index order gives the table
// and figures Run and Write give.

// Compile compiles every point of the grid, refusing the sweep if any is
// invalid (naming it), and returns the points with their seeds, as Run
// does before simulating.
func Compile(doc *whatif.Doc, vary []Vary) ([]Point, error) {
	_, pts, err := compileAll(doc, vary)
	return pts, err
}

// compileAll compiles every point of the grid, refusing the sweep if any
// is invalid.
func compileAll(doc *whatif.Doc, vary []Vary) ([]compiled, []Point, error) {
	if len(vary) == 0 {
		return nil, nil, fmt.Errorf("sweep: nothing to vary: give --vary KEY=V1,V2,...")
	}
	seen := map[string]bool{}
	for _, v := range vary {
		if seen[v.Key] {
			return nil, nil, fmt.Errorf("sweep: %s is varied twice", v.Key)
		}
		seen[v.Key] = true
	}
	grid := Grid(vary)
	cs := make([]compiled, len(grid))
	pts := make([]Point, len(grid))
	for i, vals := range grid {
		c, err := compilePoint(doc, vary, i, vals)
		if err != nil {
			return nil, nil, err
		}
		cs[i] = c
		pts[i] = Point{Index: i, Values: vals, Seed: c.seed}
	}
	return cs, pts, nil
}

// compilePoint sets the point's values on a copy of doc, compiles it by
// its kind and gives it the point's seed, exactly as Run does.
func compilePoint(doc *whatif.Doc, vary []Vary, i int, vals []string) (compiled, error) {
	if len(vals) != len(vary) {
		return compiled{}, fmt.Errorf("sweep point %d: %d values for %d varied keys", i, len(vals), len(vary))
	}
	d := doc.Clone()
	var desc []string
	for k, v := range vary {
		if err := d.Set(v.Key + "=" + vals[k]); err != nil {
			return compiled{}, fmt.Errorf("sweep point %d: %w", i, err)
		}
		desc = append(desc, v.Key+"="+vals[k])
	}
	c, err := compileKind(d, i)
	if err != nil {
		return compiled{}, fmt.Errorf("sweep point %d (%s): %w", i, strings.Join(desc, ", "), err)
	}
	return c, nil
}

// RunPoint simulates point i of the grid (values in vary order) on its own
// and returns its result and the scenario's name. The result is the one Run
// gives for that point. maxSteps, when positive, bounds the steps of each
// of its clusters (cluster.Plan.MaxSteps: a simulate point's, each what-if
// engine stage's); a plan or calibrate point is refused with one, as its
// searches run a number of simulations not known in advance.
func RunPoint(doc *whatif.Doc, vary []Vary, i int, vals []string, maxSteps int64) (PointResult, string, error) {
	c, err := compilePoint(doc, vary, i, vals)
	if err != nil {
		return PointResult{}, "", err
	}
	if maxSteps > 0 {
		if err := c.limitSteps(maxSteps); err != nil {
			return PointResult{}, "", fmt.Errorf("sweep point %d: %w", i, err)
		}
	}
	pr, err := c.run()
	if err != nil {
		return PointResult{}, "", fmt.Errorf("sweep point %d: %w", i, err)
	}
	pr.Point = Point{Index: i, Values: vals, Seed: c.seed}
	return pr, c.name, nil
}

// partCodec is shared so that its encoders are pooled across parts.
var partCodec = &zstd.Codec{}

// WriteRows writes r's rows as the table WriteTable writes (same columns,
// zstd; smaller page buffers, for many small tables) to w, with extra
// key-value metadata in the footer. A part of a distributed sweep is this
// table for one point.
func WriteRows(w io.Writer, r *Result, meta map[string]string) error {
	if err := checkKeys(r.Vary); err != nil {
		return err
	}
	opts := []parquet.WriterOption{parquet.Compression(partCodec), parquet.PageBufferSize(64 << 10)}
	for k, v := range meta {
		opts = append(opts, parquet.KeyValueMetadata(k, v))
	}
	return writeRows(w, r, opts...)
}

// Requests is the number of requests point i simulates (a what-if point:
// warm-up and measured requests of every repetition of every placement; a
// simulate point: its workload's; a plan's candidate: its workload's in
// each of the most simulations its search runs), or 0 when that is not known before the
// run (a calibration, a trace without a limit). A distributed sweep's
// worker bounds a point's work by it.
func Requests(doc *whatif.Doc, vary []Vary, i int, vals []string) (int, error) {
	c, err := compilePoint(doc, vary, i, vals)
	if err != nil {
		return 0, err
	}
	switch c.kind {
	case KindWhatif:
		l := c.wi.File.Load
		return (c.wi.Load.Requests + c.wi.Load.Warmup) * max(l.Repetitions, 1) * len(c.wi.Placements), nil
	case KindSimulate:
		return workloadRequests(c.sim.Scenario.Workload), nil
	case KindPlan:
		// Every simulation of the candidate's search replays the workload.
		return workloadRequests(c.plan.Workload) * c.plan.Plan.MaxSimulations(), nil
	}
	return 0, nil
}

// workloadRequests is the number of requests a simulate workload sends (0
// when that is not known before the run: a trace without a limit).
func workloadRequests(w scenario.WorkloadSpec) int {
	switch {
	case w.Kind == "trace":
		return w.Limit
	case w.Requests > 0:
		return w.Requests + w.Warmup
	}
	return int(math.Ceil(w.RateRPS*w.DurationS)) + w.Warmup
}
