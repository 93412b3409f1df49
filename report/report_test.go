package report

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/fit"
	"github.com/steplab/steplab/pricing"
	"github.com/steplab/steplab/replay"
	"github.com/steplab/steplab/sweep"
	"github.com/steplab/steplab/workflow/whatif"
)

const (
	steady   = "../datasets/h200/bench-steady"
	traffic  = "../datasets/h200/traffic-azure-5rps"
	ensemble = "../examples/whatif/encoder-ensemble.yaml"
)

// inputs builds one input of every kind: the default recipe fitted on the steady
// H200 grid, a step replay of the 5 req/s traffic, a small what-if run and
// a small sweep.
type inputs struct {
	model, replay, whatif, sweep string
}

func makeInputs(t *testing.T) inputs {
	t.Helper()
	for _, d := range []string{steady, traffic} {
		if _, err := os.Stat(filepath.Join(d, "manifest.json")); err != nil {
			t.Skip("bundled H200 datasets not present:", err)
		}
	}
	dir := t.TempDir()
	in := inputs{model: filepath.Join(dir, "model.json"), replay: filepath.Join(dir, "replay"), whatif: filepath.Join(dir, "whatif"), sweep: filepath.Join(dir, "sweep")}

	_, art, _, err := fit.FitDatasets([]string{steady}, fit.FitConfig{Recipe: fit.RecipeOptions{Bootstrap: 50}, CV: 0, Seed: 1})
	require.NoError(t, err)
	require.NoError(t, art.Save(in.model))

	d, err := datasets.Open(traffic)
	require.NoError(t, err)
	m, err := pricing.FromManifest(d.Manifest, in.model, "")
	require.NoError(t, err)
	_, err = replay.RunSteps(d, replay.StepOptions{FPM: m.FPM, Host: m.Host, TopN: 10},
		replay.Output{Dir: in.replay, ModelName: m.FPMName, DatasetDir: traffic})
	require.NoError(t, err)

	doc, err := whatif.Load(ensemble)
	require.NoError(t, err)
	for _, kv := range []string{"load.requests=100", "load.repetitions=2"} {
		require.NoError(t, doc.Set(kv))
	}
	sc, err := whatif.Compile(doc)
	require.NoError(t, err)
	out, err := whatif.Run(sc, whatif.Options{Jobs: 2})
	require.NoError(t, err)
	require.NoError(t, whatif.Write(in.whatif, out, whatif.WriteOptions{}))

	v, err := sweep.ParseVary("load.rate_rps=20,50,80")
	require.NoError(t, err)
	r, err := sweep.Run(doc, []sweep.Vary{v}, sweep.Options{Jobs: 2})
	require.NoError(t, err)
	require.NoError(t, sweep.Write(in.sweep, r))
	return in
}

func TestDetect(t *testing.T) {
	in := makeInputs(t)
	for path, want := range map[string]Kind{steady: KindDataset, in.model: KindModel, in.replay: KindReplay, in.whatif: KindWhatIf, in.sweep: KindSweep} {
		got, err := Detect(path)
		require.NoError(t, err, path)
		require.Equal(t, want, got.Kind, path)
	}
	_, err := Detect(t.TempDir())
	require.ErrorContains(t, err, "manifest.json")
	_, err = Detect(filepath.Join(steady, "manifest.json"))
	require.ErrorContains(t, err, "not a model artifact")
	_, err = Detect(filepath.Join(t.TempDir(), "missing"))
	require.Error(t, err)
}

// TestReportContent checks the page as HTML: every section, the tables
// and the figures, self-contained.
func TestReportContent(t *testing.T) {
	in := makeInputs(t)
	var buf bytes.Buffer
	res, err := Write(&buf, Options{Paths: []string{steady, traffic, in.replay, in.whatif, in.sweep}, Model: in.model, Tool: "steplab test"})
	require.NoError(t, err)
	html := buf.String()
	require.Equal(t, []string{TitleDatasets, TitleFit, TitleReplay, TitleWhatIf}, res.Sections)
	require.GreaterOrEqual(t, res.Figures, 10)
	for _, want := range []string{
		"<h2>Dataset summary</h2>", "<h2>Fit quality</h2>", "<h2>Replay comparison</h2>", "<h2>What-if results</h2>",
		"h200-bench-steady", "h200-traffic-azure-5rps", "Coefficients", "decode_kv_tokens", "Offered-load audit per placement",
		"inline", "remote", "Every point and placement", "Steps where prediction and record part most",
		LabelWallMs, LabelBatchBucket, LabelLatencyP90Ms, fit.LabelAPE, "time since start (s)", "offered load (req/s)",
	} {
		require.Contains(t, html, want)
	}
	// Self-contained: no external resources.
	for _, bad := range []*regexp.Regexp{regexp.MustCompile(`(?i)<(script|link)\b`), regexp.MustCompile(`(?i)\b(src|href)="(https?:)?//`), regexp.MustCompile(`(?i)url\(\s*['"]?https?:`)} {
		require.False(t, bad.MatchString(html), "external resource: %s", bad.FindString(html))
	}
	require.Equal(t, strings.Count(html, "<svg"), strings.Count(html, "</svg>"))
	require.NotContains(t, html, "<?xml")
	require.Contains(t, html, `<meta http-equiv="Content-Security-Policy" content="default-src &#39;none&#39;;`)
	// Every table scrolls inside its own box rather than widening the page.
	require.Equal(t, strings.Count(html, "<table>"), strings.Count(html, `<div class="scroll"><table>`))
	// Headings name the run once ("Sweep sweep" was the directory's name
	// after the word).
	for _, h := range regexp.MustCompile(`<h3>([^<]*)</h3>`).FindAllStringSubmatch(html, -1) {
		w := strings.Fields(strings.ToLower(h[1]))
		for i := 1; i < len(w); i++ {
			require.NotEqual(t, w[i-1], w[i], "heading %q", h[1])
		}
	}
	require.Contains(t, html, "<h3>Sweep of encoder-ensemble over load.rate_rps</h3>")
	// Same inputs, same bytes (no timestamp by default).
	var again bytes.Buffer
	_, err = Write(&again, Options{Paths: []string{steady, traffic, in.replay, in.whatif, in.sweep}, Model: in.model, Tool: "steplab test"})
	require.NoError(t, err)
	require.Equal(t, html, again.String())
}

func TestReportSubsetsAndErrors(t *testing.T) {
	in := makeInputs(t)
	// A model among the paths is found; no what-if or replay section.
	var buf bytes.Buffer
	res, err := Write(&buf, Options{Paths: []string{in.model, steady}})
	require.NoError(t, err)
	require.Equal(t, []string{TitleDatasets, TitleFit}, res.Sections)
	require.Equal(t, in.model, res.Model)

	// A replay alone finds the model it used.
	buf.Reset()
	res, err = Write(&buf, Options{Paths: []string{in.replay}})
	require.NoError(t, err)
	require.Equal(t, []string{TitleFit, TitleReplay}, res.Sections)
	require.NotEmpty(t, res.Notes)

	// Only a what-if run.
	buf.Reset()
	res, err = Write(&buf, Options{Paths: []string{in.whatif}})
	require.NoError(t, err)
	require.Equal(t, []string{TitleWhatIf}, res.Sections)
	require.Equal(t, 2, res.Figures)

	_, err = Write(&buf, Options{})
	require.ErrorContains(t, err, "no inputs")
	_, err = Write(&buf, Options{Paths: []string{t.TempDir()}})
	require.Error(t, err)
	_, err = Write(&buf, Options{Paths: []string{in.model, in.model}})
	require.ErrorContains(t, err, "two models")
	// A missing model or an unreadable dataset is an error, not a note.
	missing := filepath.Join(t.TempDir(), "missing.json")
	_, err = Write(&buf, Options{Paths: []string{steady}, Model: missing})
	require.ErrorContains(t, err, "open "+missing)
	broken := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(broken, "manifest.json"), []byte("{not json"), 0o644))
	_, err = Write(&buf, Options{Paths: []string{broken}})
	require.ErrorContains(t, err, "cannot be read")

	// A dense figure above the SVG limit is embedded as PNG.
	buf.Reset()
	_, err = Write(&buf, Options{Paths: []string{traffic}, Model: in.model, MaxInlineSVG: 1000})
	require.NoError(t, err)
	require.Contains(t, buf.String(), `src="data:image/png;base64,`)
}

// chromium finds a headless Chromium. Locally a missing browser skips the
// test; in CI (CI=true) it fails it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium-headless-shell", "chromium", "chromium-browser", "google-chrome", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true but no chromium on PATH: install Debian's chromium-headless-shell (apt-get install --no-install-recommends chromium-headless-shell)")
	}
	t.Skip("no chromium on PATH (apt-get install --no-install-recommends chromium-headless-shell); CI runs this test")
	return ""
}

func runChromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a guard against a hung browser only
	defer cancel()
	home := t.TempDir() // a fresh profile: no state shared between runs
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
		"--disable-extensions", "--user-data-dir=" + filepath.Join(home, "profile")}, args...)
	cmd := exec.CommandContext(ctx, bin, all...)
	cmd.Env = append(os.Environ(), "HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(t, err, "chromium: %s", stderr.String())
	return stdout.Bytes()
}

// TestReportInChromium renders the report in headless Chromium and checks
// what a person would see: a screenshot that is not blank, and a rendered
// DOM with the section headings and the figures' axis labels with units.
// With STEPLAB_SCREENSHOT=PATH it keeps the screenshot (docs/figures).
func TestReportInChromium(t *testing.T) {
	bin := chromium(t)
	keep := os.Getenv("STEPLAB_SCREENSHOT")
	if keep != "" {
		var err error
		keep, err = filepath.Abs(keep)
		require.NoError(t, err)
	}
	in := makeInputs(t)
	// Short relative paths, as a user would type them (the page shows them).
	absSteady, err := filepath.Abs(steady)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "datasets", "h200"), 0o755))
	require.NoError(t, os.Symlink(absSteady, filepath.Join(dir, "datasets", "h200", "bench-steady")))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "out"), 0o755))
	for _, p := range []string{in.model, in.whatif, in.sweep, in.replay} {
		require.NoError(t, os.Rename(p, filepath.Join(dir, "out", filepath.Base(p))))
	}
	t.Chdir(dir)
	page := filepath.Join(dir, "report.html")
	_, err = WriteFile(page, Options{Paths: []string{"datasets/h200/bench-steady", "out/whatif", "out/sweep", "out/replay"}, Model: "out/model.json",
		Title: "steplab report: H200 steady grid, ensemble what-if", Tool: "steplab test"})
	require.NoError(t, err)
	abs, err := filepath.Abs(page)
	require.NoError(t, err)
	url := "file://" + abs

	shot := filepath.Join(dir, "shot.png")
	if keep != "" {
		shot = keep
	}
	runChromium(t, bin, "--screenshot="+shot, "--window-size=1400,3000", url)
	f, err := os.Open(shot)
	require.NoError(t, err)
	img, err := png.Decode(f)
	f.Close()
	require.NoError(t, err)
	require.Equal(t, image.Rect(0, 0, 1400, 3000), img.Bounds())
	mean, variance, dark := pixelStats(img)
	t.Logf("screenshot %s: mean luminance %.1f, variance %.1f, dark pixels %.2f%%", shot, mean, variance, 100*dark)
	require.Greater(t, variance, 200.0, "screenshot looks blank")
	require.Greater(t, dark, 0.01, "hardly anything drawn")
	require.Less(t, dark, 0.5, "mostly dark: not the page")

	dom := string(runChromium(t, bin, "--dump-dom", url))
	for _, want := range []string{
		TitleDatasets, TitleFit, TitleReplay, TitleWhatIf,
		// Axis labels with units, as rendered text of the inline SVGs.
		LabelBatchBucket, LabelWallMs, fit.LabelMeasured, fit.LabelPredicted, fit.LabelAPE,
		LabelLatencyP90Ms, LabelThroughput, "offered load (req/s)", "time since start (s)",
		// Table headers a reader scans.
		"window throughput (req/s)", "recorded mean (ms)", "MAPE",
	} {
		require.Contains(t, dom, want)
	}
	require.Regexp(t, `<h2>\s*Fit quality\s*</h2>`, dom)
	require.Greater(t, strings.Count(dom, "<svg"), 6, "inline figures rendered")
}

// pixelStats returns the mean and variance of luminance (0–255) and the
// fraction of pixels darker than 160.
func pixelStats(img image.Image) (mean, variance, dark float64) {
	b := img.Bounds()
	var sum, sq float64
	var n, nd int
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			l := (0.299*float64(r) + 0.587*float64(g) + 0.114*float64(bl)) / 257
			sum += l
			sq += l * l
			n++
			if l < 160 {
				nd++
			}
		}
	}
	mean = sum / float64(n)
	variance = math.Max(0, sq/float64(n)-mean*mean)
	return mean, variance, float64(nd) / float64(n)
}
