package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/internal/iocount"
)

// Kind is what an input path holds.
type Kind string

// Kinds of input.
const (
	KindDataset Kind = "dataset"
	KindModel   Kind = "model"
	KindReplay  Kind = "replay"
	KindWhatIf  Kind = "whatif"
	KindSweep   Kind = "sweep"
)

// Input is one path and what it holds.
type Input struct {
	Path string `json:"path"`
	Kind Kind   `json:"kind"`
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// Detect says what path holds (see the package documentation).
func Detect(path string) (Input, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return Input{}, err
	}
	if !fi.IsDir() {
		if !strings.HasSuffix(strings.ToLower(path), ".json") {
			return Input{}, fmt.Errorf("%s: not a directory and not a model artifact (.json)", path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return Input{}, err
		}
		var probe struct {
			ArtifactVersion *int   `json:"artifact_version"`
			Form            string `json:"form"`
		}
		if json.Unmarshal(b, &probe) != nil || probe.ArtifactVersion == nil || probe.Form == "" {
			return Input{}, fmt.Errorf("%s: not a model artifact (no artifact_version and form)", path)
		}
		return Input{Path: path, Kind: KindModel}, nil
	}
	switch {
	case exists(filepath.Join(path, "audit.json")):
		return Input{Path: path, Kind: KindWhatIf}, nil
	case exists(filepath.Join(path, "sweep.json")):
		return Input{Path: path, Kind: KindSweep}, nil
	case exists(filepath.Join(path, "summary.json")):
		var probe struct {
			PrimaryField *string `json:"primary_field"`
		}
		b, err := os.ReadFile(filepath.Join(path, "summary.json"))
		if err != nil {
			return Input{}, err
		}
		if json.Unmarshal(b, &probe) != nil || probe.PrimaryField == nil {
			return Input{}, fmt.Errorf("%s: summary.json is not a step replay's (steplab replay steps); request replays are not reported yet", path)
		}
		return Input{Path: path, Kind: KindReplay}, nil
	case exists(filepath.Join(path, "manifest.json")):
		return Input{Path: path, Kind: KindDataset}, nil
	}
	return Input{}, fmt.Errorf("%s: none of manifest.json (dataset), summary.json (replay steps), audit.json (whatif) or sweep.json (sweep)", path)
}

// Options configure Build.
type Options struct {
	// Paths are the inputs, detected by Detect.
	Paths []string
	// Model is a model artifact; it overrides one among the Paths.
	Model string
	// Title of the page (default: "steplab report").
	Title string
	// Tool names the program in the footer (e.g. "steplab v0.3.0").
	Tool string
	// Now stamps the page; zero leaves the time out (reproducible output).
	Now time.Time
	// MaxInlineSVG is the largest SVG inlined, in bytes; larger figures are
	// embedded as PNG (default 300 KB).
	MaxInlineSVG int
	// Worst is the number of worst steps listed per table (default 10).
	Worst int
	// WorkDir holds intermediate figures (default: a temporary directory,
	// removed afterwards).
	WorkDir string
	// Progress, when set, is called as each part of the page begins (a
	// dataset's summary, the model, its evaluation on a dataset, a replay,
	// a what-if run, a sweep) with the parts begun and their total.
	Progress func(begun, total int)
}

// Result says what a report holds.
type Result struct {
	Inputs   []Input  `json:"inputs"`
	Model    string   `json:"model,omitempty"`
	Sections []string `json:"sections"`
	Figures  int      `json:"figures"`
	Bytes    int64    `json:"bytes"`
	Notes    []string `json:"notes,omitempty"`
}

// Write renders the report of opts to w.
func Write(w io.Writer, opts Options) (*Result, error) {
	if len(opts.Paths) == 0 && opts.Model == "" {
		return nil, errors.New("report: no inputs (give datasets, replay, whatif or sweep directories, or a model)")
	}
	if opts.Title == "" {
		opts.Title = "steplab report"
	}
	if opts.MaxInlineSVG <= 0 {
		opts.MaxInlineSVG = 300_000
	}
	if opts.Worst <= 0 {
		opts.Worst = 10
	}
	if opts.WorkDir == "" {
		tmp, err := os.MkdirTemp("", "steplab-report-*")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		opts.WorkDir = tmp
	}
	res := &Result{}
	var datasetsIn, replays, whatifs, sweeps []string
	modelPath := opts.Model
	for _, p := range opts.Paths {
		in, err := Detect(p)
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		res.Inputs = append(res.Inputs, in)
		switch in.Kind {
		case KindDataset:
			datasetsIn = append(datasetsIn, p)
		case KindModel:
			if modelPath == "" {
				modelPath = p
			} else if opts.Model == "" {
				return nil, fmt.Errorf("report: two models given (%s and %s): give one, or choose with --fpm", modelPath, p)
			}
		case KindReplay:
			replays = append(replays, p)
		case KindWhatIf:
			whatifs = append(whatifs, p)
		case KindSweep:
			sweeps = append(sweeps, p)
		}
	}
	b := &builder{opts: opts, res: res, parts: len(datasetsIn) + len(replays) + len(whatifs) + len(sweeps)}
	if modelPath == "" {
		// The model a replay used, when its file is still there.
		for _, r := range replays {
			if m := replayModel(r); m != "" {
				modelPath = m
				b.note(fmt.Sprintf("fit quality: using the model the replay %s used (%s)", r, m))
				break
			}
		}
	}
	res.Model = modelPath
	if modelPath != "" {
		b.parts += 1 + len(datasetsIn)
	}

	if len(datasetsIn) > 0 {
		b.datasetSection(datasetsIn)
	}
	if modelPath != "" {
		b.fitSection(modelPath, datasetsIn)
	}
	if len(replays) > 0 {
		b.replaySection(replays)
	}
	if len(whatifs) > 0 || len(sweeps) > 0 {
		b.whatifSection(whatifs, sweeps)
	}
	if b.err != nil {
		return nil, b.err
	}
	pg := page{CSS: template.CSS(pageCSS), CSP: pageCSP, Title: opts.Title, Tool: opts.Tool, Inputs: res.Inputs, Model: modelPath, Sections: b.sections, Notes: res.Notes}
	if !opts.Now.IsZero() {
		pg.Generated = opts.Now.UTC().Format(time.RFC3339)
	}
	for _, s := range b.sections {
		res.Sections = append(res.Sections, s.Title)
	}
	res.Figures = b.figures
	cw := &iocount.Writer{W: w}
	if err := pageTemplate.Execute(cw, pg); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	res.Bytes = cw.N
	return res, nil
}

// WriteFile renders the report into path, written under a temporary name
// and renamed when complete.
func WriteFile(path string, opts Options) (*Result, error) {
	if d := filepath.Dir(path); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	var res *Result
	err := datasets.WriteAtomic(path, func(w io.Writer) error {
		var err error
		res, err = Write(w, opts)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func replayModel(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		return ""
	}
	var s struct {
		Model string `json:"model"`
	}
	if json.Unmarshal(b, &s) != nil || s.Model == "" {
		return ""
	}
	if in, err := Detect(s.Model); err == nil && in.Kind == KindModel {
		return s.Model
	}
	return ""
}
