package sweep

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/steplab/steplab/internal/pool"
	"github.com/steplab/steplab/planner"
	"github.com/steplab/steplab/replay"
	"github.com/steplab/steplab/sim/rng"
	"github.com/steplab/steplab/workflow/whatif"
)

// Vary is one swept key and its values (YAML scalars or flow values).
type Vary struct {
	Key    string
	Values []string
}

// ParseVary reads KEY=V1,V2,...; commas inside [] or {} do not split.
func ParseVary(s string) (Vary, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" || v == "" {
		return Vary{}, fmt.Errorf("--vary %q: want KEY=V1,V2,...", s)
	}
	var vals []string
	depth, start := 0, 0
	for i := 0; i <= len(v); i++ {
		if i < len(v) {
			switch v[i] {
			case '[', '{':
				depth++
			case ']', '}':
				depth--
			}
		}
		if i == len(v) || (v[i] == ',' && depth == 0) {
			x := strings.TrimSpace(v[start:i])
			if x == "" {
				return Vary{}, fmt.Errorf("--vary %q: empty value", s)
			}
			vals = append(vals, x)
			start = i + 1
		}
	}
	return Vary{Key: k, Values: vals}, nil
}

// Point is one scenario of the grid.
type Point struct {
	Index int
	// Values, one per Vary, in order.
	Values []string
	// Seed of the point's scenario: derived from the scenario's seed and
	// the index.
	Seed uint64
}

// PointResult is a point's outcome: a what-if audit, a simulate report
// or a calibration, by the sweep's kind.
type PointResult struct {
	Point
	Audit     *whatif.Audit       `json:"Audit,omitempty"`
	Simulate  *SimPoint           `json:"Simulate,omitempty"`
	Calibrate *replay.CalibResult `json:"Calibrate,omitempty"`
	Plan      *planner.Candidate  `json:"Plan,omitempty"`
}

// Result is a sweep.
type Result struct {
	// Kind is what the points ran ("": a what-if scenario).
	Kind     string `json:"Kind,omitempty"`
	Scenario string
	Vary     []Vary
	Points   []PointResult
}

// kind is the result's kind, whatif when unnamed.
func (r *Result) kind() string {
	if r.Kind == "" {
		return KindWhatif
	}
	return r.Kind
}

// Options tune Run.
type Options struct {
	// Jobs is the number of points simulated at once (0 = GOMAXPROCS).
	Jobs int
	// Progress, when set, hears each finished point.
	Progress func(done, total int)
	// Point, when set, hears each point's result as it finishes, from the
	// goroutine that ran it (concurrently with the others).
	Point func(PointResult)
}

// Grid enumerates the cartesian product, the first key slowest.
func Grid(vary []Vary) [][]string {
	out := [][]string{nil}
	for _, v := range vary {
		var next [][]string
		for _, prefix := range out {
			for _, x := range v.Values {
				next = append(next, append(append([]string(nil), prefix...), x))
			}
		}
		out = next
	}
	return out
}

// PointSeed derives point i's seed from the scenario's.
func PointSeed(seed uint64, i int) uint64 { return rng.New(seed, "sweep").DeriveN(i).Seed() }

// Run compiles every point (refusing the sweep if any is invalid, naming
// it) and simulates them.
func Run(doc *whatif.Doc, vary []Vary, opts Options) (*Result, error) {
	cs, pts, err := compileAll(doc, vary)
	if err != nil {
		return nil, err
	}
	res := &Result{Kind: kindName(cs[0].kind), Vary: vary, Points: make([]PointResult, len(pts))}
	for i := range pts {
		res.Scenario = cs[i].name
	}
	err = pool.Run(len(cs), opts.Jobs, func(i int) error {
		pr, err := cs[i].run()
		if err != nil {
			return fmt.Errorf("sweep point %d: %w", i, err)
		}
		pr.Point = pts[i]
		res.Points[i] = pr
		if opts.Point != nil {
			opts.Point(pr)
		}
		return nil
	}, opts.Progress)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// numeric reports whether every value of v parses as a number.
func numeric(v Vary) bool {
	for _, x := range v.Values {
		if _, err := strconv.ParseFloat(x, 64); err != nil {
			return false
		}
	}
	return true
}

// kindName is a kind as Result.Kind records it: "" for what-if (as
// before kinds existed), the name otherwise.
func kindName(k string) string {
	if k == KindWhatif {
		return ""
	}
	return k
}
