package report

import (
	"bytes"
	"encoding/xml"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/plotter"

	"github.com/steplab/steplab/internal/plotstyle"
)

// hostile matches what must never reach the page from an SVG: script,
// foreign content, style sheets, links and animation, event handlers,
// script or external URLs.
var hostile = regexp.MustCompile(`(?i)<\s*(script|foreignobject|style|a|set|animate\w*|use|iframe|object|embed|body|html)\b|\son\w+\s*=|javascript:|vbscript:|https?:|url\(|expression\(|data:image/svg|data:text|xml:base`)

var textNode = regexp.MustCompile(`>[^<]*<`)

// markup is out's tags only: without its text (drawn as text, so
// "javascript:" in it is harmless; the output escapes every "<" in text)
// and without the namespace declarations the sanitiser writes (their URLs
// are names, never fetched).
func markup(out string) string {
	out = textNode.ReplaceAllString(out, "><")
	return strings.NewReplacer(`xmlns="`+svgNS+`"`, "", `xmlns:xlink="`+xlinkNS+`"`, "").Replace(out)
}

const svgOpen = `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" viewBox="0 0 10 10">`

// injections are hostile SVG documents; keep names the text that must
// survive as drawn text (the rest of the document is dropped).
var injections = []struct {
	name, svg string
	keep      []string
	refused   bool // the document as a whole is not shown
}{
	{"script element", svgOpen + `<script>document.title='x'</script><text>ok</text></svg>`, []string{"<text>ok</text>"}, false},
	{"script in a namespace", svgOpen + `<h:script xmlns:h="http://www.w3.org/1999/xhtml">alert(1)</h:script><svg:script xmlns:svg="http://www.w3.org/2000/svg">alert(2)</svg:script></svg>`, nil, false},
	{"upper-case script", svgOpen + `<SCRIPT>alert(1)</SCRIPT></svg>`, nil, false},
	{"onload on the root", `<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)" viewBox="0 0 1 1"><path d="M0,0L1,1"/></svg>`, []string{`d="M0,0L1,1"`}, false},
	{"handlers on shapes", svgOpen + `<g onclick="alert(1)" OnMouseOver="alert(2)"><path d="M0,0" onmouseover="alert(3)"/></g></svg>`, []string{`<path d="M0,0">`}, false},
	{"javascript link", svgOpen + `<a xlink:href="javascript:alert(1)"><text>click</text></a></svg>`, nil, false},
	{"javascript image", svgOpen + `<image xlink:href="javascript:alert(1)" width="1" height="1"/></svg>`, nil, false},
	{"external image", svgOpen + `<image href="https://example.com/x.png" width="1" height="1"/></svg>`, nil, false},
	{"svg image data", svgOpen + `<image href="data:image/svg+xml;base64,PHN2Zy8+" width="1" height="1"/></svg>`, nil, false},
	{"foreignObject", svgOpen + `<foreignObject><body xmlns="http://www.w3.org/1999/xhtml"><script>alert(1)</script><img src="x" onerror="alert(2)"/></body></foreignObject></svg>`, nil, false},
	{"CDATA closing the text", svgOpen + `<text><![CDATA[</text><script>alert(1)</script>]]></text></svg>`, []string{`&lt;/text&gt;&lt;script&gt;alert(1)&lt;/script&gt;`}, false},
	{"escaped markup in text", svgOpen + `<text>&lt;script&gt;alert(1)&lt;/script&gt; &amp;lt;b&amp;gt;</text></svg>`, []string{`&lt;script&gt;alert(1)&lt;/script&gt; &amp;lt;b&amp;gt;`}, false},
	{"doctype entity expanding to markup", `<!DOCTYPE svg [<!ENTITY x "<script>alert(1)</script>">]>` + svgOpen + `<text>&x;</text></svg>`, nil, true},
	{"numeric character references", svgOpen + `<text>&#60;script&#62;alert(1)&#60;/script&#62;</text></svg>`, []string{`&lt;script&gt;`}, false},
	{"style url(javascript:)", svgOpen + `<path d="M0,0" style="fill:url(javascript:alert(1));stroke:#000000"/></svg>`, []string{`style="stroke:#000000"`}, false},
	{"style element", svgOpen + `<style>@import url(https://example.com/x.css); text{background:url(javascript:alert(1))}</style></svg>`, nil, false},
	{"CSS escapes and expression", svgOpen + `<path d="M0,0" style="fill:\75rl(x);width:expression(alert(1));stroke:#FF0000"/></svg>`, []string{`style="stroke:#FF0000"`}, false},
	{"presentation attribute url", svgOpen + `<path d="M0,0" fill="url(https://example.com/#p)" stroke="#000000"/></svg>`, []string{`stroke="#000000"`}, false},
	{"quote-breaking attribute", svgOpen + `<text x='1" onmouseover="alert(1)' y="2">t</text><text y='2"/&gt;&lt;script&gt;alert(1)&lt;/script&gt;'>u</text></svg>`, []string{`<text y="2">t</text>`, `<text>u</text>`}, false},
	{"transform smuggling a call", svgOpen + `<g transform="scale(1) url(javascript:alert(1))"><g transform="scale(1, -1) translate(0, -10)"></g></g></svg>`, []string{`transform="scale(1, -1) translate(0, -10)"`}, false},
	{"animation rewriting attributes", svgOpen + `<set attributeName="onload" to="alert(1)"/><animate attributeName="href" to="javascript:alert(1)"/></svg>`, nil, false},
	{"use of an external document", svgOpen + `<use href="https://example.com/x.svg#a"/><use xlink:href="data:image/svg+xml,&lt;svg onload=alert(1)&gt;"/></svg>`, nil, false},
	{"nested svg", svgOpen + `<svg onload="alert(1)"><text>inner</text></svg></svg>`, nil, false},
	{"xml:base and stylesheet PI", `<?xml-stylesheet href="https://example.com/x.css"?>` + svgOpen + `<g xml:base="javascript:/"><path d="M0,0"/></g></svg>`, []string{`<path d="M0,0">`}, false},
	{"title closing early", svgOpen + `<title>&lt;/title&gt;&lt;script&gt;alert(1)&lt;/script&gt;</title></svg>`, []string{`&lt;/title&gt;`}, false},
	{"not svg", `<html><script>alert(1)</script></html>`, nil, true},
	{"not XML", svgOpen + `<text>unclosed</svg>`, nil, true},
}

func TestSanitizeSVGInjections(t *testing.T) {
	require.GreaterOrEqual(t, len(injections), 14)
	for _, tc := range injections {
		t.Run(tc.name, func(t *testing.T) {
			require.Regexp(t, hostile, tc.svg+strings.Join(tc.keep, ""), "the vector must be hostile (else the test proves nothing)")
			out, err := sanitizeSVG([]byte(tc.svg), `label "quoted" <b>`)
			if tc.refused {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.NotRegexp(t, hostile, markup(out))
			require.Contains(t, out, `aria-label="label &#34;quoted&#34; &lt;b&gt;"`)
			for _, k := range tc.keep {
				require.Contains(t, out, k)
			}
			requireAllowed(t, out)
		})
	}
}

// TestSanitizeSVGKeepsPlots: a gonum/plot figure (text, paths, an image)
// keeps every element and its drawing attributes.
func TestSanitizeSVGKeepsPlots(t *testing.T) {
	f := plotstyle.New(`title <with> "quotes" & more`, "x (ms)", "y (%)")
	l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 1}, {X: 1, Y: 3}})
	require.NoError(t, err)
	l.Dashes = plotstyle.Dashes(1)
	f.Add(l)
	f.AddLegend("line", l)
	hm := plotter.NewHeatMap(grid{}, palette.Heat(4, 1))
	hm.Rasterized = true // drawn as an embedded PNG image
	f.Add(hm)
	raw, err := f.Render(figW, figH, "svg")
	require.NoError(t, err)
	require.Contains(t, string(raw), "<image")
	out, err := sanitizeSVG(raw, "t")
	require.NoError(t, err)
	for _, el := range []string{"<path", "<text", "<g", "<image"} {
		require.Equal(t, strings.Count(string(raw), el), strings.Count(out, el), el)
	}
	for _, want := range []string{`title &lt;with&gt; &#34;quotes&#34; &amp; more`, "x (ms)", "stroke-dasharray", `xlink:href="data:image/`, "font-family:Liberation Sans", `viewBox="0 0 453.54 340.16"`} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, `width="453.54pt"`, "the page sizes the figure")
	again, err := sanitizeSVG([]byte(out), "t")
	require.NoError(t, err)
	require.Equal(t, out, again, "sanitising is idempotent")
}

type grid struct{}

func (grid) Dims() (int, int)        { return 2, 2 }
func (grid) Z(c, r int) float64      { return float64(c + r) }
func (grid) X(c int) float64         { return float64(c) }
func (grid) Y(r int) float64         { return float64(r) }
func (grid) Min() (float64, float64) { return 0, 0 }

// requireAllowed parses out and checks every element and attribute against
// the allow-list.
func requireAllowed(t testing.TB, out string) {
	d := xml.NewDecoder(strings.NewReader(out))
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return
		}
		require.NoError(t, err, out)
		if se, ok := tok.(xml.StartElement); ok {
			require.True(t, svgElements[se.Name.Local], "element %s", se.Name.Local)
			for _, a := range se.Attr {
				name := a.Name.Local
				switch {
				case a.Name.Space == "xmlns" || (a.Name.Space == "" && name == "xmlns") || name == "role" || name == "aria-label":
				case name == "href":
					require.Regexp(t, imageData, a.Value)
				case name == "style":
					require.Equal(t, cleanStyle(a.Value), a.Value)
				default:
					require.Empty(t, a.Name.Space, "attribute %s:%s", a.Name.Space, name)
					require.Contains(t, svgAttrs, name)
					require.Regexp(t, svgAttrs[name], a.Value)
				}
			}
		}
	}
}

// FuzzSanitizeSVG: whatever the input, the output is an SVG of allowed
// elements and attributes, with nothing hostile, and sanitising it again
// changes nothing.
func FuzzSanitizeSVG(f *testing.F) {
	for _, tc := range injections {
		f.Add([]byte(tc.svg))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := sanitizeSVG(b, "l")
		if err != nil {
			return
		}
		requireAllowed(t, out)
		require.NotRegexp(t, hostile, markup(out))
		again, err := sanitizeSVG([]byte(out), "l")
		require.NoError(t, err)
		require.Equal(t, out, again)
		require.False(t, bytes.Contains([]byte(out), []byte("<!")), "no comment, CDATA or doctype")
	})
}
