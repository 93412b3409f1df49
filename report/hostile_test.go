package report

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/sweep"
)

// ran is the attribute a hostile script sets when it runs; the scripts
// build its value from pieces, so the page only holds it if one ran.
const ran = `data-ran="yes"`

const payload = `document.documentElement.setAttribute('data-ran','y'+'es')`

// hostileSVG is a figure with every way of running payload in Chromium
// that an inline SVG offers.
const hostileSVG = `<?xml version="1.0"?>
<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" viewBox="0 0 100 100" onload="` + payload + `">
<script>` + payload + `</script>
<script type="text/javascript"><![CDATA[` + payload + `]]></script>
<foreignObject width="10" height="10"><body xmlns="http://www.w3.org/1999/xhtml"><script>` + payload + `</script></body></foreignObject>
<a xlink:href="javascript:` + payload + `"><text x="1" y="10">click</text></a>
<image href="x.png" width="1" height="1" onerror="` + payload + `"/>
<text x="1" y="20">&lt;script&gt;` + payload + `&lt;/script&gt;</text>
<path d="M0,0L100,100" style="stroke:#000000;fill:url(javascript:x)"/>
</svg>`

// hostileName breaks out of attributes and elements when not escaped.
const hostileName = `x"><script>` + payload + `</script><img src=x onerror="` + payload + `">`

// writeHostileInputs makes a dataset whose manifest names are hostile, in
// a directory whose name is hostile, a sweep whose figures are hostile
// (one SVG, one PNG that is HTML) and a step replay with hostile figures.
func writeHostileInputs(t *testing.T) []string {
	t.Helper()
	root := t.TempDir()
	ds := filepath.Join(root, `ds"><img src=x onerror=alert(1)>`)
	w, err := datasets.Create(ds, datasets.Manifest{Name: hostileName, Source: datasets.Source{Kind: "simulate", Format: hostileName},
		Hardware: &datasets.Hardware{GPUName: hostileName}, Model: &datasets.ModelShape{Name: hostileName}, Notes: []string{hostileName}}, datasets.CreateOptions{})
	require.NoError(t, err)
	tw, err := datasets.NewTableWriter[datasets.Step](w, datasets.TableSteps, datasets.TableOptions{})
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, tw.Append(datasets.Step{StepID: int64(i), Kind: hostileName, Role: "production", Valid: true, NumDecodeRequests: 1, WallTimeNs: 5e6}))
	}
	require.NoError(t, tw.Close())
	require.NoError(t, w.Close())

	sw := filepath.Join(root, "sweep")
	require.NoError(t, os.MkdirAll(sw, 0o755))
	for name, body := range map[string]string{
		"sweep.json":              `{"scenario": "` + strings.ReplaceAll(hostileName, `"`, `\"`) + `", "vary": [{"key": "load.rate_rps"}], "points": []}`,
		sweep.Throughput + ".svg": hostileSVG,
		sweep.LatencyP90 + ".png": "<html><script>" + payload + "</script></html>",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(sw, name), []byte(body), 0o644))
	}
	rs := filepath.Join(root, "replay")
	require.NoError(t, os.MkdirAll(rs, 0o755))
	for name, body := range map[string]string{
		"summary.json":        `{"primary_field": "gpu_time_ns", "dataset": "` + strings.ReplaceAll(hostileName, `"`, `\"`) + `", "fields": []}`,
		"steps.time.svg":      hostileSVG,
		"steps.error_cdf.svg": strings.Replace(hostileSVG, "<svg", `<!DOCTYPE svg [<!ENTITY x "<script>`+payload+`</script>">]><svg`, 1) + "&x;",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(rs, name), []byte(body), 0o644))
	}
	return []string{ds, sw, rs}
}

// TestHostileReportHTML: the page holds no script or handler from its
// inputs, only escaped text; its CSP names the hash of its one style sheet.
func TestHostileReportHTML(t *testing.T) {
	var sb strings.Builder
	res, err := Write(&sb, Options{Paths: writeHostileInputs(t), Title: hostileName})
	require.NoError(t, err)
	html := sb.String()
	require.NotRegexp(t, `(?i)<script|<img src=x|\son\w+="|javascript:|<foreignobject`, html)
	require.Contains(t, html, `x&#34;&gt;&lt;script&gt;`, "the hostile name is shown, escaped")
	require.Contains(t, html, "latency_p90.png is not shown: not a PNG file")
	require.Contains(t, html, "steps.error_cdf.svg is not shown: not well-formed SVG")
	require.GreaterOrEqual(t, res.Figures, 4)

	csp := regexp.MustCompile(`<meta http-equiv="Content-Security-Policy" content="([^"]+)">`).FindStringSubmatch(html)
	require.NotNil(t, csp, "a CSP meta tag")
	require.Contains(t, csp[1], "default-src &#39;none&#39;")
	require.Contains(t, csp[1], "script-src &#39;none&#39;")
	style := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindAllStringSubmatch(html, -1)
	require.Len(t, style, 1, "one style sheet")
	require.Equal(t, pageCSS, style[0][1], "the style sheet is the one the CSP hash allows")
	require.Contains(t, pageCSP, "'sha256-")
}

// TestHostileReportInChromium loads a report made from hostile inputs in
// headless Chromium and checks that no script ran. Two controls show the
// check can fail: the same SVG inlined raw in a page runs its scripts, and
// a script added to the report's page runs once its Content-Security-Policy
// is taken out, and not while it is there.
func TestHostileReportInChromium(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	_, err := WriteFile(page, Options{Paths: writeHostileInputs(t), Title: hostileName})
	require.NoError(t, err)
	b, err := os.ReadFile(page)
	require.NoError(t, err)

	raw := filepath.Join(dir, "raw.html")
	require.NoError(t, os.WriteFile(raw, []byte("<!DOCTYPE html><html><body>"+strings.TrimPrefix(hostileSVG, `<?xml version="1.0"?>`)+"</body></html>"), 0o644))
	injected, unguarded := filepath.Join(dir, "injected.html"), filepath.Join(dir, "unguarded.html")
	withScript := strings.Replace(string(b), "</head>", "<script>"+payload+"</script></head>", 1)
	require.NoError(t, os.WriteFile(injected, []byte(withScript), 0o644))
	meta := regexp.MustCompile(`<meta http-equiv="Content-Security-Policy"[^>]*>`)
	require.NoError(t, os.WriteFile(unguarded, []byte(meta.ReplaceAllString(withScript, "")), 0o644))

	dom := func(path string) string {
		return string(runChromium(t, bin, "--virtual-time-budget=3000", "--dump-dom", "file://"+path))
	}
	require.Contains(t, dom(raw), ran, "control: the raw SVG's scripts run")
	require.Contains(t, dom(unguarded), ran, "control: a script added to the page without its policy runs")
	require.NotContains(t, dom(injected), ran, "the CSP stops a script added to the page")
	got := dom(page)
	require.NotContains(t, got, ran, "no script ran")
	require.Contains(t, got, "What-if results", "the page rendered")
}
