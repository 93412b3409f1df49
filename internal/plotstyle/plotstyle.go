// Package plotstyle is the one place steplab's figures take their colours
// and their legend placement from. A report puts figures of the fit, the
// replay, the what-if runs and the sweeps on one page, so a colour must mean
// one thing on it: a step kind is the same colour in every chart, measured
// and predicted are their own colours, placements take colours no step kind
// uses, and reference lines (identity, offered rate, zero) are grey.
//
// Figure draws its legend in a band below the plot area, in as many columns
// as fit the width, so it never covers the data and is never clipped.
package plotstyle

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

func rgb(v uint32) color.RGBA {
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 0xff}
}

// Colours of fixed meaning.
var (
	// Measured is a recorded or measured series.
	Measured color.Color = rgb(0x222222)
	// Predicted is a model's or a re-simulation's prediction of it.
	Predicted color.Color = rgb(0xc0392b)
	// Reference is a guide line: identity, offered rate, zero.
	Reference color.Color = rgb(0x8a8a8a)
)

// Step kinds have fixed colours; other kinds take one of kindExtra by a
// hash of their name, so they too keep it from chart to chart.
var (
	kindColours = map[string]color.Color{"decode": rgb(0x2458b3), "prefill": rgb(0xe08a1e), "mixed": rgb(0x2a8a4a)}
	kindExtra   = []color.Color{rgb(0x17a2b8), rgb(0x6b4c9a), rgb(0x9c6b30)}
)

// placements take colours no step kind or fixed meaning uses.
var placements = []color.Color{rgb(0x7b3fa0), rgb(0x0f8b8d), rgb(0xb5487a), rgb(0x8c6d1f), rgb(0x3d5a80), rgb(0x6a994e)}

// Kind is the colour of a step kind.
func Kind(kind string) color.Color {
	if c, ok := kindColours[kind]; ok {
		return c
	}
	h := fnv.New32a()
	h.Write([]byte(kind))
	return kindExtra[h.Sum32()%uint32(len(kindExtra))]
}

// Placement is the colour of the i-th placement of a what-if scenario
// (placements are listed in the scenario's order in every chart).
func Placement(i int) color.Color { return placements[i%len(placements)] }

// Dashes gives the i-th of a few dash patterns (solid first), to tell apart
// lines of one colour.
func Dashes(i int) []vg.Length {
	switch i % 3 {
	case 1:
		return []vg.Length{vg.Points(5), vg.Points(3)}
	case 2:
		return []vg.Length{vg.Points(1.5), vg.Points(2.5)}
	}
	return nil
}

// sans is the variant of gonum/plot's Liberation fonts the figures use:
// Liberation Sans has Arial's and Helvetica's metrics, so text a browser
// draws with either of them (a page's fallback) takes the width measured
// here.
const sans = "Sans"

// Figure is a plot whose legend is drawn below it.
type Figure struct {
	*plot.Plot
	entries []entry
}

type entry struct {
	name   string
	thumbs []plot.Thumbnailer
}

// New returns a figure with a title, axis labels and a grid.
func New(title, x, y string) *Figure {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	for _, t := range []*text.Style{&p.Title.TextStyle, &p.X.Label.TextStyle, &p.Y.Label.TextStyle, &p.X.Tick.Label, &p.Y.Tick.Label} {
		t.Font.Variant = sans
	}
	p.Title.TextStyle.Font.Size = vg.Points(12)
	p.X.Label.TextStyle.Font.Size = vg.Points(11)
	p.Y.Label.TextStyle.Font.Size = vg.Points(11)
	p.Add(plotter.NewGrid())
	return &Figure{Plot: p}
}

// AddLegend adds a legend entry.
func (f *Figure) AddLegend(name string, thumbs ...plot.Thumbnailer) {
	f.entries = append(f.entries, entry{name, thumbs})
}

// NominalX names the x positions 0, 1, … and keeps half a position on
// either side, so the first and last labels (and bars) are not clipped.
// Labels that would not fit side by side in a figure's width are slanted.
func (f *Figure) NominalX(names ...string) {
	f.Plot.NominalX(names...)
	f.X.Min, f.X.Max = -0.5, float64(len(names))-0.5
	widest := vg.Length(0)
	for _, n := range names {
		widest = max(widest, f.X.Tick.Label.Rectangle(n).Size().X)
	}
	if (widest+legendGap/2)*vg.Length(len(names)) > 12*vg.Centimeter {
		f.X.Tick.Label.Rotation = math.Pi / 6
		f.X.Tick.Label.XAlign, f.X.Tick.Label.YAlign = draw.XRight, draw.YTop
	}
}

const legendGap = vg.Length(14) // between columns, and around the band

// spare scales measured text widths: a browser without Liberation Sans or
// Arial (Linux falls back to DejaVu Sans) draws text about 20% wider.
const spare = 1.25

// Render draws the figure, w × h, in format (svg, png, pdf…).
func (f *Figure) Render(w, h vg.Length, format string) ([]byte, error) {
	c, err := draw.NewFormattedCanvas(w, h, format)
	if err != nil {
		return nil, err
	}
	dc := draw.New(c)
	legends, colW, bandH := f.layout(w)
	f.fitYLabel(h - bandH)
	// A margin on the right keeps the last x tick label inside the figure.
	f.Plot.Draw(draw.Crop(dc, 0, -legendGap, bandH, 0))
	x0 := max(0, (w-colW*vg.Length(len(legends)))/2) // a legend wider than the figure starts at its left
	for j := range legends {
		band := draw.Crop(dc, x0+colW*vg.Length(j), 0, 0, -(h - bandH + legendGap/2))
		legends[j].Draw(band)
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// fitYLabel shrinks the y axis label's font (to 8 pt at least) when the
// label is longer than the height h leaves beside the title and the x axis
// (measured with text to spare, as the legend).
func (f *Figure) fitYLabel(h vg.Length) {
	sty := &f.Y.Label.TextStyle
	room := h - f.Title.TextStyle.Rectangle(f.Title.Text).Size().Y - 4*f.X.Label.TextStyle.Font.Size
	if long := spare * sty.Rectangle(f.Y.Label.Text).Size().X; long > room && room > 0 {
		sty.Font.Size = max(vg.Points(8), sty.Font.Size*room/long)
	}
}

// layout splits the entries into columns, row by row, as many as fit in
// w, and returns the column legends, their width and the band's height.
func (f *Figure) layout(w vg.Length) ([]plot.Legend, vg.Length, vg.Length) {
	if len(f.entries) == 0 {
		return nil, 0, 0
	}
	proto := plot.NewLegend()
	proto.Top, proto.Left = true, true
	proto.Padding = vg.Points(2)
	proto.TextStyle.Font.Variant = sans
	sty := proto.TextStyle
	colW := vg.Length(0)
	for _, e := range f.entries {
		colW = max(colW, proto.ThumbnailWidth+spare*sty.Rectangle(" "+e.name).Size().X+legendGap)
	}
	cols := max(1, min(len(f.entries), int((w-legendGap)/colW)))
	rows := (len(f.entries) + cols - 1) / cols
	legends := make([]plot.Legend, cols)
	for j := range legends {
		legends[j] = proto
		for i := j; i < len(f.entries); i += cols {
			legends[j].Add(f.entries[i].name, f.entries[i].thumbs...)
		}
	}
	enth := sty.Rectangle("Mg").Size().Y
	return legends, colW, vg.Length(rows)*(enth+proto.Padding) + legendGap
}

// Save writes the figure, w × h, to path in the format its extension names.
func (f *Figure) Save(w, h vg.Length, path string) error {
	b, err := f.Render(w, h, strings.TrimPrefix(filepath.Ext(path), "."))
	if err != nil {
		return fmt.Errorf("figure %s: %w", path, err)
	}
	return os.WriteFile(path, b, 0o644)
}
