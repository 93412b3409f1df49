package plotstyle

import (
	"fmt"
	"image/color"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func hex(c color.Color) string {
	r, g, b, _ := c.RGBA()
	return fmt.Sprintf("#%02x%02x%02x", r>>8, g>>8, b>>8)
}

// TestOneColourPerMeaning: the step kinds, measured, predicted, reference
// and the placements never share a colour, and a kind's colour does not
// depend on the chart.
func TestOneColourPerMeaning(t *testing.T) {
	seen := map[string]string{}
	claim := func(meaning string, c color.Color) {
		if prev, ok := seen[hex(c)]; ok {
			t.Fatalf("%s and %s share %s", prev, meaning, hex(c))
		}
		seen[hex(c)] = meaning
	}
	for _, k := range []string{"decode", "prefill", "mixed"} {
		claim("kind "+k, Kind(k))
	}
	for i, c := range kindExtra {
		claim(fmt.Sprintf("other kind %d", i), c)
	}
	claim("measured", Measured)
	claim("predicted", Predicted)
	claim("reference", Reference)
	for i := range placements {
		claim(fmt.Sprintf("placement %d", i), Placement(i))
	}
	require.Equal(t, Kind("encode"), Kind("encode"), "an unknown kind keeps its colour")
	require.Contains(t, kindExtra, Kind("encode"))
	require.Equal(t, Placement(0), Placement(len(placements)), "placements cycle")
}

var textAt = regexp.MustCompile(`<text x="([-\d.e]+)" y="([-\d.e]+)"[^>]*>([^<]*)</text>`)

// TestLegendBelowThePlot: every legend entry is drawn inside the figure,
// below the x axis's label (so below the data), whatever the number and
// length of the entries.
func TestLegendBelowThePlot(t *testing.T) {
	const w, h = 16 * vg.Centimeter, 12 * vg.Centimeter
	for _, tc := range []struct {
		name    string
		entries []string
	}{
		{"one", []string{"decode"}},
		{"several short", []string{"a1", "b2", "c3", "d4", "e5", "f6", "g7"}},
		{"long", []string{"decode (n=2785, p90 17.1%)", "mixed (n=462, p90 29.0%)", "prefill (n=2, p90 30.4%)"}},
		{"wider than the figure", []string{"an entry whose name is far longer than the whole figure is wide, so it cannot fit in any column at all"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := New("title", "x label", "y label")
			for i, e := range tc.entries {
				l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: float64(i)}, {X: 1, Y: float64(i + 1)}})
				require.NoError(t, err)
				f.Add(l)
				f.AddLegend(e, l)
			}
			svg, err := f.Render(w, h, "svg")
			require.NoError(t, err)
			pos := map[string][2]float64{}
			for _, m := range textAt.FindAllStringSubmatch(string(svg), -1) {
				x, _ := strconv.ParseFloat(m[1], 64)
				y, _ := strconv.ParseFloat(m[2], 64)
				pos[m[3]] = [2]float64{x, -y} // the SVG flips y
			}
			axis, ok := pos["x label"]
			require.True(t, ok, "x label drawn")
			for _, e := range tc.entries {
				p, ok := pos[e]
				require.True(t, ok, "entry %q drawn", e)
				require.Less(t, p[1], axis[1], "entry %q below the x axis label", e)
				require.GreaterOrEqual(t, p[1], 0.0, "entry %q inside the figure", e)
				require.GreaterOrEqual(t, p[0], 0.0, "entry %q starts inside the figure", e)
				if len(e) < 60 {
					require.LessOrEqual(t, p[0]+f.Legend.TextStyle.Rectangle(e).Size().X.Points(), w.Points(), "entry %q ends inside the figure", e)
				}
			}
		})
	}
}
