package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Curve is a piecewise-linear function y(x) through Points (x strictly
// ascending), flat beyond its first and last points. One point is a
// constant: the flat shorthand a hardware spec writes as a bare number
// ("gemm_efficiency: 0.80"); several are written as [x, y] pairs
// ("[[1, 0.3], [64, 0.7], [4096, 0.8]]"), the form a fit from a measured
// operation database produces. The roofline's achievable-fraction curves
// are Curves over a documented x (tokens, bytes).
type Curve struct {
	Points [][2]float64
}

// Flat is the constant curve y.
func Flat(y float64) Curve { return Curve{Points: [][2]float64{{0, y}}} }

// At evaluates the curve at x: linear between neighbouring points, the
// end values beyond them. An empty curve is 0.
func (c Curve) At(x float64) float64 {
	p := c.Points
	switch {
	case len(p) == 0:
		return 0
	case len(p) == 1 || x <= p[0][0]:
		return p[0][1]
	case x >= p[len(p)-1][0]:
		return p[len(p)-1][1]
	}
	i := 1
	for p[i][0] < x {
		i++
	}
	x0, y0, x1, y1 := p[i-1][0], p[i-1][1], p[i][0], p[i][1]
	return y0 + (y1-y0)*(x-x0)/(x1-x0)
}

// IsFlat reports a constant curve.
func (c Curve) IsFlat() bool { return len(c.Points) == 1 }

// validateFraction checks a curve of achievable fractions: at least one
// point, finite ascending x, every y in (0, 1].
func (c Curve) validateFraction(field string) error {
	if len(c.Points) == 0 {
		return fmt.Errorf("%s: missing: give a fraction in (0, 1] or a list of [x, y] points", field)
	}
	for i, p := range c.Points {
		if math.IsNaN(p[0]) || math.IsInf(p[0], 0) || (i > 0 && p[0] <= c.Points[i-1][0]) {
			return fmt.Errorf("%s: point %d: x = %v: x must be finite and strictly ascending", field, i, p[0])
		}
		if !(p[1] > 0 && p[1] <= 1) {
			return fmt.Errorf("%s: point %d: %v is not a fraction in (0, 1]", field, i, p[1])
		}
	}
	return nil
}

// String is the curve as a spec file writes it.
func (c Curve) String() string {
	b, _ := c.MarshalJSON()
	return string(b)
}

// MarshalJSON writes a flat curve as its number, any other as [[x, y], ...].
func (c Curve) MarshalJSON() ([]byte, error) {
	if c.IsFlat() {
		return []byte(strconv.FormatFloat(c.Points[0][1], 'g', -1, 64)), nil
	}
	if c.Points == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(c.Points)
}

// UnmarshalJSON reads a number or a list of [x, y] pairs.
func (c *Curve) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] != '[' {
		var y float64
		if err := json.Unmarshal(b, &y); err != nil {
			return fmt.Errorf("curve: want a number or a list of [x, y] pairs: %w", err)
		}
		*c = Flat(y)
		return nil
	}
	var pts [][2]float64
	if err := json.Unmarshal(b, &pts); err != nil {
		return fmt.Errorf("curve: want a number or a list of [x, y] pairs: %w", err)
	}
	c.Points = pts
	return nil
}

// UnmarshalYAML reads a number or a sequence of [x, y] pairs.
func (c *Curve) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var y float64
		if err := n.Decode(&y); err != nil {
			return fmt.Errorf("line %d: want a number or a list of [x, y] pairs, got %q", n.Line, n.Value)
		}
		*c = Flat(y)
		return nil
	}
	var pts [][]float64
	if err := n.Decode(&pts); err != nil {
		return fmt.Errorf("line %d: want a number or a list of [x, y] pairs", n.Line)
	}
	c.Points = make([][2]float64, len(pts))
	for i, p := range pts {
		if len(p) != 2 {
			return fmt.Errorf("line %d: point %d has %d values, want [x, y]", n.Line, i, len(p))
		}
		c.Points[i] = [2]float64{p[0], p[1]}
	}
	return nil
}
