package report

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"math"
	"os"
)

// page is what the template renders.
type page struct {
	CSS       template.CSS
	CSP       string
	Title     string
	Tool      string
	Generated string
	Inputs    []Input
	Model     string
	Sections  []*section
	Notes     []string
}

// section is one top-level part of the report (h2), made of blocks (h3).
type section struct {
	ID     string
	Title  string
	Intro  string
	Blocks []*block
}

type block struct {
	Heading string
	Prose   string
	Notes   []string
	Tables  []*table
	Figures []*figure
	// Side puts the figures beside the tables rather than below them.
	Side bool
}

type table struct {
	Caption string
	Head    []string
	Rows    [][]cell
}

type cell struct {
	Text  string
	Num   bool
	Class string // "bad", "good" or ""
}

// figure is a sanitised inline SVG or a PNG data URI, with a caption that
// names what the axes show; Note, when set, says why there is no figure.
type figure struct {
	Title   string
	Caption string
	SVG     template.HTML
	PNG     template.URL
	Note    string
}

func txt(s string) cell { return cell{Text: s} }

func num(format string, v float64) cell {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return cell{Text: "–", Num: true}
	}
	return cell{Text: fmt.Sprintf(format, v), Num: true}
}

func intc(v int64) cell { return cell{Text: fmt.Sprintf("%d", v), Num: true} }

// pct formats a percentage, marking large errors.
func pct(v float64) cell {
	c := num("%.1f%%", v)
	if !math.IsNaN(v) {
		switch a := math.Abs(v); {
		case a >= 25:
			c.Class = "bad"
		case a <= 5:
			c.Class = "good"
		}
	}
	return c
}

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

// loadFigure reads base.svg (sanitised and inlined, if at most maxSVG
// bytes) or else base.png (as a data URI). It returns nil when neither
// exists, and a figure with a note when the file cannot be shown.
func loadFigure(base string, maxSVG int, title, caption string) (*figure, error) {
	f := &figure{Title: title, Caption: caption}
	if b, err := os.ReadFile(base + ".svg"); err == nil && len(b) <= maxSVG {
		svg, err := sanitizeSVG(b, title)
		if err != nil {
			f.Note = fmt.Sprintf("%s.svg is not shown: %v", base, err)
		}
		f.SVG = template.HTML(svg) // sanitised: an allow-list only
		return f, nil
	}
	b, err := os.ReadFile(base + ".png")
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	if !bytes.HasPrefix(b, pngMagic) {
		f.Note = base + ".png is not shown: not a PNG file"
		return f, nil
	}
	f.PNG = template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(b))
	return f, nil
}

// svgFigure is a figure the report drew itself: svg, or the note err
// gives when the data cannot be drawn.
func svgFigure(svg []byte, err error, title, caption string) (*figure, error) {
	f := &figure{Title: title, Caption: caption}
	var nf noFigure
	if errors.As(err, &nf) {
		f.Note = "not drawn: " + nf.Error()
		return f, nil
	}
	if err != nil {
		return nil, err
	}
	s, err := sanitizeSVG(svg, title)
	if err != nil {
		return nil, fmt.Errorf("report: figure %q: %w", title, err)
	}
	f.SVG = template.HTML(s) // sanitised: an allow-list only
	return f, nil
}

// pageCSS is the page's only style sheet; the Content-Security-Policy
// allows it by its hash and nothing else: no script, no other style sheet,
// no fonts, frames or objects, images only from data: URIs (the PNG
// figures). Style attributes stay allowed: the inline SVGs are drawn with
// them.
const pageCSS = `
:root { --fg:#1d2330; --muted:#5b6475; --line:#d8dce4; --head:#f1f3f7; --accent:#2458b3; --bad:#b3261e; --good:#1e7b34; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.5 "Liberation Sans", "DejaVu Sans", Arial, Helvetica, sans-serif; color:var(--fg); background:#fff; }
main { max-width:1220px; margin:0 auto; padding:24px 28px 60px; }
header { border-bottom:3px solid var(--accent); margin-bottom:18px; padding-bottom:8px; }
h1 { font-size:28px; margin:0 0 4px; }
h2 { font-size:22px; margin:34px 0 8px; padding-top:10px; border-top:1px solid var(--line); color:var(--accent); }
h3 { font-size:17px; margin:22px 0 6px; }
p, li { max-width:80ch; }
.muted { color:var(--muted); font-size:13px; }
nav ul { display:flex; flex-wrap:wrap; gap:6px 18px; padding:0; list-style:none; margin:6px 0 0; }
nav a { color:var(--accent); text-decoration:none; }
code { font-family:"Liberation Mono", "DejaVu Sans Mono", monospace; font-size:13px; background:var(--head); padding:1px 4px; border-radius:3px; }
.tables { display:flex; flex-wrap:wrap; gap:8px 28px; align-items:flex-start; }
.scroll { max-width:100%; min-width:0; overflow-x:auto; }
table { border-collapse:collapse; margin:8px 0 14px; font-size:13.5px; }
caption { text-align:left; font-weight:bold; padding:0 0 4px; font-size:13.5px; }
th, td { border:1px solid var(--line); padding:3px 9px; vertical-align:top; }
th { background:var(--head); text-align:left; font-weight:600; }
td.num { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
tbody tr:nth-child(even) td { background:#fafbfd; }
td.bad { color:var(--bad); font-weight:600; }
td.good { color:var(--good); }
.side { width:560px; max-width:100%; margin:8px 0 14px; }
.figs { display:grid; grid-template-columns:repeat(2, minmax(0, 1fr)); gap:18px; margin:10px 0 8px; }
figure { margin:0; border:1px solid var(--line); border-radius:4px; padding:8px; background:#fff; }
figure svg, figure img { display:block; width:100%; height:auto; }
/* the figures' own font (Liberation Sans) or one of its metrics, so legends measured for it fit */
figure svg text { font-family:"Liberation Sans", Arimo, Arial, Helvetica, sans-serif !important; }
figcaption { font-size:13px; color:var(--muted); margin-top:6px; }
figcaption b { color:var(--fg); }
.fignote { margin:8px 0; }
.note { border-left:4px solid #d99a1e; background:#fff8e8; padding:6px 10px; margin:8px 0; font-size:13.5px; max-width:100ch; }
footer { margin-top:40px; border-top:1px solid var(--line); padding-top:8px; }
`

var pageCSP = func() string {
	sum := sha256.Sum256([]byte(pageCSS))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; style-src-attr 'unsafe-inline'; " +
		"img-src data:; script-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'"
}()

var pageTemplate = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{{.CSP}}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>{{.CSS}}</style>
</head>
<body>
<main>
<header>
<h1>{{.Title}}</h1>
<div class="muted">{{if .Tool}}{{.Tool}}{{end}}{{if .Generated}} · generated {{.Generated}}{{end}}</div>
<div class="muted">inputs: {{range $i, $in := .Inputs}}{{if $i}}, {{end}}<code>{{$in.Path}}</code> ({{$in.Kind}}){{end}}{{if .Model}} · model <code>{{.Model}}</code>{{end}}</div>
<nav><ul>{{range .Sections}}<li><a href="#{{.ID}}">{{.Title}}</a></li>{{end}}</ul></nav>
</header>
{{range .Notes}}<div class="note">{{.}}</div>
{{end}}
{{range .Sections}}
<section id="{{.ID}}">
<h2>{{.Title}}</h2>
{{if .Intro}}<p>{{.Intro}}</p>{{end}}
{{range .Blocks}}
{{if .Heading}}<h3>{{.Heading}}</h3>{{end}}
{{if .Prose}}<p>{{.Prose}}</p>{{end}}
{{range .Notes}}<div class="note">{{.}}</div>
{{end}}
{{if .Tables}}<div class="tables">
{{range .Tables}}<div class="scroll">{{template "table" .}}</div>{{end}}
{{if .Side}}{{range .Figures}}<div class="side">{{template "figure" .}}</div>{{end}}{{end}}
</div>{{end}}
{{if and .Figures (not .Side)}}<div class="figs">
{{range .Figures}}{{template "figure" .}}{{end}}</div>{{end}}
{{end}}
</section>
{{end}}
<footer class="muted">Self-contained: figures are inline SVG or PNG, nothing is loaded from the network. Written by <code>steplab report</code>; see docs/report.md.</footer>
</main>
</body>
</html>
{{define "table"}}<table>
<caption>{{.Caption}}</caption>
<thead><tr>{{range .Head}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{range .Rows}}<tr>{{range .}}<td{{if or .Num .Class}} class="{{if .Num}}num{{end}}{{if .Class}} {{.Class}}{{end}}"{{end}}>{{.Text}}</td>{{end}}</tr>
{{end}}</tbody>
</table>
{{end}}{{define "figure"}}<figure>
{{if .Note}}<div class="note fignote">{{.Note}}</div>{{else if .SVG}}{{.SVG}}{{else}}<img src="{{.PNG}}" alt="{{.Title}}">{{end}}
<figcaption><b>{{.Title}}.</b> {{.Caption}}</figcaption>
</figure>
{{end}}`))
