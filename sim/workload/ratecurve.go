package workload

import (
	"fmt"
	"math"
)

// RatePoint is one point of a rate curve: the arrival rate at a time since
// the stream's start.
type RatePoint struct {
	AtS float64 // seconds since StartNs
	RPS float64 // requests per second (>= 0)
}

// rateCurve is a piecewise-linear rate (held at the last point's rate after
// it) and its integral at each point: the expected arrivals by then.
type rateCurve struct {
	pts []RatePoint
	cum []float64
}

// CheckRateCurve refuses a curve that does not start at 0, goes back in
// time, has a negative or infinite rate, or never sends a request.
func CheckRateCurve(pts []RatePoint, at string) error {
	positive := false
	for i, p := range pts {
		switch {
		case i == 0 && p.AtS != 0:
			return fmt.Errorf("%s[0].t_s is %g: the curve starts at t_s 0", at, p.AtS)
		case i > 0 && !(p.AtS > pts[i-1].AtS):
			return fmt.Errorf("%s[%d].t_s is %g: times must increase (previous %g)", at, i, p.AtS, pts[i-1].AtS)
		case math.IsInf(p.AtS, 0):
			return fmt.Errorf("%s[%d].t_s is %g: use a finite time", at, i, p.AtS)
		case !(p.RPS >= 0) || math.IsInf(p.RPS, 0):
			return fmt.Errorf("%s[%d].rps is %g: use a finite rate >= 0", at, i, p.RPS)
		}
		positive = positive || p.RPS > 0
	}
	if !positive {
		return fmt.Errorf("%s: every rate is 0: give at least one point a rate > 0", at)
	}
	return nil
}

func newRateCurve(pts []RatePoint) *rateCurve {
	c := &rateCurve{pts: pts, cum: make([]float64, len(pts))}
	for i := 1; i < len(pts); i++ {
		dt := pts[i].AtS - pts[i-1].AtS
		c.cum[i] = c.cum[i-1] + dt*(pts[i-1].RPS+pts[i].RPS)/2
	}
	return c
}

// at is the time (s) by which the curve expects u arrivals: the inverse of
// its integral. False when the curve never reaches u (it ends at rate 0).
func (c *rateCurve) at(u float64) (float64, bool) {
	n := len(c.pts)
	i := 0
	for i+1 < n && c.cum[i+1] <= u { // past zero-rate stretches too
		i++
	}
	p, du := c.pts[i], u-c.cum[i]
	if i+1 == n { // past the last point: its rate, held
		if p.RPS == 0 {
			return 0, false
		}
		return p.AtS + du/p.RPS, true
	}
	// Within [p, q]: rate a + b·t, so du = a·dt + b·dt²/2; the root in the
	// form that stays exact for b = 0 and a = 0.
	q := c.pts[i+1]
	a, b := p.RPS, (q.RPS-p.RPS)/(q.AtS-p.AtS)
	d := a + math.Sqrt(max(0, a*a+2*b*du))
	if d == 0 {
		return p.AtS, true
	}
	return p.AtS + 2*du/d, true
}
