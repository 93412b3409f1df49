package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"html"
	"io"
	"regexp"
	"strings"
)

// The SVG a report inlines comes from run directories anyone may have
// written, so it is parsed and written again keeping only what gonum/plot
// draws with: the elements and attributes below, attribute values made of
// characters that cannot form a URL, a function call or a quote, and
// images only as PNG, JPEG or GIF data. Everything else (script,
// foreignObject, style sheets, links, animation, event handlers, external
// references, comments, doctypes) is dropped, an element with its content.
// Text is re-escaped, so CDATA and entities come out as text.

const (
	svgNS   = "http://www.w3.org/2000/svg"
	xlinkNS = "http://www.w3.org/1999/xlink"
)

var svgElements = map[string]bool{
	"svg": true, "g": true, "path": true, "text": true, "tspan": true, "image": true,
	"rect": true, "circle": true, "ellipse": true, "line": true, "polyline": true, "polygon": true,
	"title": true, "desc": true,
}

var (
	plainValue    = regexp.MustCompile(`^[-+#.,%\w\s]*$`)
	pathValue     = regexp.MustCompile(`^[-+.,\deEMmLlHhVvCcSsQqTtAaZz\s]*$`)
	transformCall = regexp.MustCompile(`^\s*((matrix|translate|scale|rotate|skewX|skewY)\s*\([-+.,\deE\s]*\)[\s,]*)*$`)
	imageData     = regexp.MustCompile(`^data:image/(png|jpeg|jpg|gif);base64,[A-Za-z0-9+/=\s]+$`)
)

// presentation are the presentation attributes kept, and the CSS
// properties kept from style attributes, all with plainValue values (no
// url(), no expression(), no escapes).
var presentation = strings.Fields(`fill fill-opacity fill-rule stroke stroke-width stroke-opacity
	stroke-dasharray stroke-dashoffset stroke-linecap stroke-linejoin stroke-miterlimit opacity
	font-family font-size font-weight font-style font-variant text-anchor dominant-baseline`)

// svgAttrs maps an attribute to the check of its value; styleProps is the
// set of CSS properties kept.
var svgAttrs, styleProps = func() (map[string]*regexp.Regexp, map[string]bool) {
	attrs := map[string]*regexp.Regexp{"d": pathValue, "points": pathValue, "transform": transformCall}
	for _, a := range strings.Fields("x y dx dy width height cx cy r rx ry x1 y1 x2 y2 viewBox preserveAspectRatio") {
		attrs[a] = plainValue
	}
	props := map[string]bool{}
	for _, a := range presentation {
		attrs[a], props[a] = plainValue, true
	}
	return attrs, props
}()

// sanitizeSVG returns the SVG document b rewritten as described above,
// labelled for screen readers and sized by the page (its viewBox keeps the
// aspect). A document that is not well-formed XML with an svg root is an
// error.
func sanitizeSVG(b []byte, label string) (string, error) {
	d := xml.NewDecoder(bytes.NewReader(b))
	d.Strict = true
	var out strings.Builder
	depth := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("not well-formed SVG: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if depth == 0 && (t.Name.Local != "svg" || out.Len() > 0) {
				return "", errors.New("not an SVG document (the root element is not svg)")
			}
			if !svgElements[t.Name.Local] || (t.Name.Space != "" && t.Name.Space != svgNS) || (depth > 0 && t.Name.Local == "svg") {
				if err := d.Skip(); err != nil {
					return "", fmt.Errorf("not well-formed SVG: %w", err)
				}
				continue
			}
			if !writeElement(&out, t, depth == 0, label) {
				if err := d.Skip(); err != nil {
					return "", fmt.Errorf("not well-formed SVG: %w", err)
				}
				continue
			}
			depth++
		case xml.EndElement:
			depth--
			out.WriteString("</" + t.Name.Local + ">")
		case xml.CharData:
			if depth > 0 {
				out.WriteString(html.EscapeString(string(t)))
			}
		}
	}
	if out.Len() == 0 {
		return "", errors.New("not an SVG document (no svg element)")
	}
	return out.String(), nil
}

// writeElement writes the start tag of an allowed element with its allowed
// attributes; it reports false (writing nothing) for an image that is not
// inline image data.
func writeElement(out *strings.Builder, t xml.StartElement, root bool, label string) bool {
	var attrs []string
	hasViewBox := false
	for _, a := range t.Attr {
		if a.Name.Local == "viewBox" && a.Name.Space == "" {
			hasViewBox = true
		}
	}
	href := ""
	for _, a := range t.Attr {
		name, v := a.Name.Local, a.Value
		switch {
		case name == "href" && (a.Name.Space == "" || a.Name.Space == xlinkNS || a.Name.Space == "xlink"):
			href = v
			continue
		case a.Name.Space != "":
			continue
		case root && hasViewBox && (name == "width" || name == "height"):
			continue // the page sizes the figure
		case name == "style":
			if s := cleanStyle(v); s != "" {
				attrs = append(attrs, attr("style", s))
			}
			continue
		}
		if check, ok := svgAttrs[name]; ok && check.MatchString(v) {
			attrs = append(attrs, attr(name, v))
		}
	}
	if t.Name.Local == "image" {
		if !imageData.MatchString(href) {
			return false
		}
		attrs = append(attrs, attr("xlink:href", href))
	}
	out.WriteString("<" + t.Name.Local)
	if root {
		out.WriteString(` xmlns="` + svgNS + `" xmlns:xlink="` + xlinkNS + `" role="img"` + attr("aria-label", label))
	}
	out.WriteString(strings.Join(attrs, ""))
	out.WriteString(">")
	return true
}

func attr(name, v string) string { return " " + name + `="` + html.EscapeString(v) + `"` }

// cleanStyle keeps the declarations of styleProps with plain values.
func cleanStyle(s string) string {
	var kept []string
	for _, decl := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(decl, ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if ok && styleProps[k] && plainValue.MatchString(v) {
			kept = append(kept, k+":"+v)
		}
	}
	return strings.Join(kept, ";")
}
