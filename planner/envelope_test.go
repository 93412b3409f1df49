package planner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"gonum.org/v1/plot/plotter"
)

func TestEnvelope(t *testing.T) {
	pts := plotter.XYs{{X: 3, Y: 5}, {X: 1, Y: 2}, {X: 2, Y: 1}, {X: 2, Y: 4}, {X: 4, Y: 4}}
	tests := []struct {
		sign float64
		want plotter.XYs
	}{
		{1, plotter.XYs{{X: 1, Y: 2}, {X: 2, Y: 4}, {X: 3, Y: 5}}}, // the most at each x or less
		{-1, plotter.XYs{{X: 1, Y: 2}, {X: 2, Y: 1}}},              // the least
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, envelope(pts, tt.sign))
	}
}

func TestParseLayout(t *testing.T) {
	tests := []struct {
		in   string
		x, y int
		err  bool
	}{
		{in: "agg"}, {in: "1p2d", x: 1, y: 2}, {in: "12P3D", x: 12, y: 3},
		{in: "p2d", err: true}, {in: "0p1d", err: true}, {in: "2p", err: true}, {in: "2x3", err: true}, {in: "", err: true},
	}
	for _, tt := range tests {
		x, y, err := parseLayout(tt.in)
		if tt.err {
			assert.Error(t, err, tt.in)
			continue
		}
		assert.NoError(t, err, tt.in)
		assert.Equal(t, [2]int{tt.x, tt.y}, [2]int{x, y}, tt.in)
	}
}
