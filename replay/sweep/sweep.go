package sweep

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/steplab/steplab/replay/pool"
	"github.com/steplab/steplab/replay/whatif"
	"github.com/steplab/steplab/sim/rng"
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

// PointResult is a point's audit.
type PointResult struct {
	Point
	Audit whatif.Audit
}

// Result is a sweep.
type Result struct {
	Scenario string
	Vary     []Vary
	Points   []PointResult
}

// Options tune Run.
type Options struct {
	// Jobs is the number of points simulated at once (0 = GOMAXPROCS).
	Jobs int
	// Progress, when set, hears each finished point.
	Progress func(done, total int)
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
	scs, pts, err := compileAll(doc, vary)
	if err != nil {
		return nil, err
	}
	res := &Result{Vary: vary, Points: make([]PointResult, len(pts))}
	for i := range pts {
		res.Points[i].Point = pts[i]
		res.Scenario = scs[i].File.Name
	}
	err = pool.Run(len(scs), opts.Jobs, func(i int) error {
		out, err := whatif.Run(scs[i], whatif.Options{Jobs: 1})
		if err != nil {
			return fmt.Errorf("sweep point %d: %w", i, err)
		}
		res.Points[i].Audit = out.Audit
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
