package importers

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/embedded"
	"github.com/steplab/steplab/internal/inflight"
)

// Format describes one importer.
type Format struct {
	Name    string // the FORMAT argument of `steplab import`
	Table   string // the table it writes
	Summary string // one line for --help
	run     func(in *input, s *sink) error
}

var formats = []Format{
	{Name: "azure", Table: datasets.TableRequests, run: runAzure,
		Summary: "Azure LLM inference trace CSV (TIMESTAMP,ContextTokens,GeneratedTokens)"},
	{Name: "mooncake", Table: datasets.TableRequests, run: runMooncake,
		Summary: "Mooncake JSONL trace (timestamp ms, input_length, output_length, hash_ids per 512-token block)"},
	{Name: "vllm-requests", Table: datasets.TableRequests, run: runVLLMRequests,
		Summary: "per-request vLLM JSONL (queued/scheduled/first/last token times) with meta.json beside it"},
	{Name: "dynamo-fpm-artifact", Table: datasets.TableSteps, run: runDynamoArtifact,
		Summary: "Dynamo self-benchmark result JSON, schema_version 2 (results[{point,fpms}])"},
	{Name: "dynamo-fpm", Table: datasets.TableSteps, run: runDynamoFPM,
		Summary: "stream of msgpack ForwardPassMetrics v1 records (as published on Dynamo's FPM ZMQ socket)"},
	{Name: "vllm-bench", Table: datasets.TableRequests, run: runVLLMBench,
		Summary: "`vllm bench serve --save-result` result JSON (with --save-detailed: per-request lengths, TTFT, latency, start times; without: a summary)"},
	{Name: "sglang-bench", Table: datasets.TableRequests, run: runSGLangBench,
		Summary: "`sglang.bench_serving --output-file F` result, one run (with --output-details: per-request lengths, TTFT, ITLs; without: a summary)"},
	{Name: "aiperf", Table: datasets.TableRequests, run: runAIPerf,
		Summary: "AIPerf profile_export.jsonl, either record schema (per-request start and end, TTFT, input and output lengths)"},
	{Name: "burstgpt", Table: datasets.TableRequests, run: runBurstGPT,
		Summary: "BurstGPT trace CSV (Timestamp, Model, Request tokens, Response tokens, Total tokens, Log Type)"},
	{Name: "blis", Table: datasets.TableRequests, run: runBLIS,
		Summary: "BLIS (inference-sim) TraceV2 CSV with its <prefix>.yaml header beside it"},
}

// Formats lists the importers in the order --help shows them.
func Formats() []Format { return append([]Format(nil), formats...) }

// LookupFormat finds an importer by name.
func LookupFormat(name string) (Format, error) {
	for _, f := range formats {
		if f.Name == name {
			return f, nil
		}
	}
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = f.Name
	}
	return Format{}, fmt.Errorf("unknown import format %q (have: %s; a Parquet or CSV table of your own: steplab import table)", name, strings.Join(names, ", "))
}

// Options tune Import.
type Options struct {
	// Overwrite replaces an existing dataset at the output directory.
	Overwrite bool
	// ToolName, ToolVersion and Command go into the manifest's Tool.
	ToolName    string
	ToolVersion string
	Command     []string
	// Progress, when set, is called now and then with the number of source
	// bytes read so far.
	Progress func(bytesRead int64)
	// Hardware, Model and Engine name what ran, for sources that do not
	// record it (or record it wrongly): a GPU and a model the catalogue
	// knows (the caller checks), and NAME[@VERSION] (ParseEngine).
	Hardware, Model, Engine string
}

// Result summarises an import.
type Result struct {
	Dir     string `json:"dir"`
	Format  string `json:"format"`
	Source  string `json:"source"`
	SHA256  string `json:"sha256"`
	Table   string `json:"table"`
	Rows    int64  `json:"rows"`
	Skipped int64  `json:"skipped,omitempty"` // records read but not written (idle heartbeats)
	// EngineSamples counts the rows of the engine_samples table, where the
	// source has the engine's scheduler state over time.
	EngineSamples int64 `json:"engine_samples,omitempty"`
	// FirstNs and LastNs bound the rows' time axis (arrivals for requests,
	// cumulative wall time for steps); SpanNs = LastNs - FirstNs.
	FirstNs int64    `json:"first_ns"`
	LastNs  int64    `json:"last_ns"`
	SpanNs  int64    `json:"span_ns"`
	Notes   []string `json:"notes,omitempty"`
	// Summary: the source is a run's summary without per-request records;
	// the dataset has no rows and its figures are in the manifest.
	Summary bool `json:"summary,omitempty"`

	timeOrigin int64 // the table wrapper's instant moved to 0
}

// Import reads src in the given format and writes a dataset at dir.
//
// src is a file path, a directory (vllm-requests), or "embedded:NAME" for a
// trace shipped in the binary (see package embedded). The dataset is written
// under a temporary name beside dir and renamed into place only when the
// whole source has been read without error, so a bad input never leaves a
// half-written dataset, and --force replaces the old dataset only on success.
func Import(format, src, dir string, opts Options) (*Result, error) {
	f, err := LookupFormat(format)
	if err != nil {
		return nil, err
	}
	if _, err := ParseEngine(opts.Engine); err != nil {
		return nil, fmt.Errorf("engine %w", err)
	}
	if dir, err = outputDir(dir, opts.Overwrite); err != nil {
		return nil, err
	}
	in, err := openInput(src, f.Name)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	in.progress = opts.Progress

	base := opts.manifest(dir, f.Name, in.display)
	s := &sink{m: base}
	err = stage(dir, opts.Overwrite, base, func(w *datasets.Writer) error {
		s.openSamples = func() (func(datasets.EngineSample) error, func() error, error) {
			return batchWriter[datasets.EngineSample](w, datasets.TableEngineSamples)
		}
		var err error
		switch f.Table {
		case datasets.TableRequests:
			s.request, s.flush, err = batchWriter[datasets.Request](w, f.Table)
		case datasets.TableSteps:
			s.step, s.flush, err = batchWriter[datasets.Step](w, f.Table)
		}
		if err != nil {
			return err
		}
		if err := f.run(in, s); err != nil {
			return err
		}
		if err := opts.describe(s); err != nil {
			return err
		}
		if err := in.drain(); err != nil {
			return fmt.Errorf("%s: %w", in.name, err)
		}
		if err := s.flush(); err != nil {
			return err
		}
		if s.flushSamples != nil {
			if err := s.flushSamples(); err != nil {
				return err
			}
		}
		s.m.Source.SHA256 = in.sum()
		if s.m.Workload != nil {
			s.m.Workload.InputSHA256 = s.m.Source.SHA256
		}
		return w.UpdateManifest(func(m *datasets.Manifest) {
			tables, status, v := m.Tables, m.Status, m.SchemaVersion
			*m = s.m
			m.Tables, m.Status, m.SchemaVersion = tables, status, v
		})
	})
	if err != nil {
		return nil, err
	}
	res := &Result{Dir: dir, Format: f.Name, Source: in.display, SHA256: s.m.Source.SHA256, Table: f.Table,
		Rows: s.rows, Skipped: s.skipped, EngineSamples: s.samples, Notes: s.m.Notes, Summary: s.summary}
	if s.rows > 0 {
		res.FirstNs, res.LastNs, res.SpanNs = s.first, s.last, s.last-s.first
	}
	return res, nil
}

// manifest is the manifest an import starts from.
func (o *Options) manifest(dir, format, path string) datasets.Manifest {
	return datasets.Manifest{
		Name:   filepath.Base(dir),
		Tool:   datasets.Tool{Name: orDefault(o.ToolName, "steplab"), Version: orDefault(o.ToolVersion, "dev"), Command: o.Command},
		Source: datasets.Source{Kind: "import", Format: format, Path: path},
	}
}

// stage writes a dataset with write under a temporary name beside dir, and
// renames it to dir only when write and the writer succeed: a bad input
// never leaves a half-written dataset, and --force replaces the old
// dataset only on success.
func stage(dir string, overwrite bool, m datasets.Manifest, write func(w *datasets.Writer) error) error {
	if err := datasets.RemoveLeftovers(dir); err != nil {
		return err
	}
	tmp := datasets.StagingPath(dir, "importing")
	_ = os.RemoveAll(tmp)
	if err := inflight.Track(tmp); err != nil {
		return err
	}
	defer inflight.Done(tmp)
	w, err := datasets.Create(tmp, m, datasets.CreateOptions{})
	if err != nil {
		return err
	}
	if err = write(w); err != nil {
		_ = w.Abort(err.Error())
	} else if err = w.Close(); err == nil {
		err = replaceDir(tmp, dir, overwrite)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
	}
	return err
}

// outputDir checks the output directory before any work (the rules of
// datasets.Create) and cleans its path.
func outputDir(dir string, overwrite bool) (string, error) {
	if dir == "" {
		return "", errors.New("no output directory (-o DIR)")
	}
	dir = filepath.Clean(dir)
	return dir, checkTarget(dir, overwrite)
}

// batchWriter opens table for rows of type T and returns add, which buffers
// rows and writes them a batch at a time, and flush, which writes the rest
// and closes the table.
func batchWriter[T any](w *datasets.Writer, table string) (add func(T) error, flush func() error, err error) {
	const batch = 4096
	tw, err := datasets.NewTableWriter[T](w, table, datasets.DefaultTableOptions)
	if err != nil {
		return nil, nil, err
	}
	buf := make([]T, 0, batch)
	add = func(r T) error {
		buf = append(buf, r)
		if len(buf) == batch {
			err := tw.Write(buf)
			buf = buf[:0]
			return err
		}
		return nil
	}
	flush = func() error {
		if err := tw.Write(buf); err != nil {
			return err
		}
		return tw.Close()
	}
	return add, flush, nil
}

// ReadRequests parses a request trace (any format that writes requests) into
// memory without writing a dataset: the rows Import would write. Tests and
// benchmarks use it on embedded traces, e.g.
// ReadRequests("azure", "embedded:azure-conv-2023").
func ReadRequests(format, src string) ([]datasets.Request, error) {
	var rows []datasets.Request
	err := readInto(format, src, datasets.TableRequests,
		&sink{request: func(r datasets.Request) error { rows = append(rows, r); return nil }})
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// readInto runs a format's parser over src into s, checking that the
// format writes table.
func readInto(format, src, table string, s *sink) error {
	f, err := LookupFormat(format)
	if err != nil {
		return err
	}
	if f.Table != table {
		return fmt.Errorf("format %s writes %s, not %s", f.Name, f.Table, table)
	}
	in, err := openInput(src, f.Name)
	if err != nil {
		return err
	}
	defer in.Close()
	return f.run(in, s)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// checkTarget refuses an existing non-empty output unless overwriting a
// steplab dataset; the same rules as datasets.Create, checked before any work.
func checkTarget(dir string, overwrite bool) error {
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if !overwrite {
		return fmt.Errorf("%s: already exists and is not empty (use --force to overwrite)", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, datasets.ManifestFile)); err != nil {
		return fmt.Errorf("%s: refusing to overwrite a directory that is not a steplab dataset", dir)
	}
	return nil
}

func replaceDir(tmp, dir string, overwrite bool) error {
	if err := checkTarget(dir, overwrite); err != nil {
		return err
	}
	return datasets.ReplaceDir(tmp, dir)
}

// sink receives what an importer produces: rows through request/step, and
// provenance in m (Source.Kind/Format/Path and Tool are preset).
type sink struct {
	m       datasets.Manifest
	request func(datasets.Request) error
	step    func(datasets.Step) error
	flush   func() error

	rows, skipped int64
	first, last   int64

	// openSamples opens the engine_samples table on first use (nil when
	// reading into memory: the samples are dropped); flushSamples closes it.
	openSamples  func() (func(datasets.EngineSample) error, func() error, error)
	sample       func(datasets.EngineSample) error
	flushSamples func() error
	samples      int64

	// summary: the source holds a run's summary, no rows (benchSummary).
	summary bool
}

// addSample writes one engine_samples row.
func (s *sink) addSample(r datasets.EngineSample) error {
	if s.sample == nil {
		if s.openSamples == nil {
			s.samples++
			return nil
		}
		add, flush, err := s.openSamples()
		if err != nil {
			return err
		}
		s.sample, s.flushSamples = add, flush
	}
	s.samples++
	return s.sample(r)
}

func (s *sink) addRequest(r datasets.Request) error {
	s.track(r.ArrivalNs)
	if s.request == nil {
		return errors.New("internal: this format writes requests")
	}
	return s.request(r)
}

func (s *sink) addStep(st datasets.Step, t int64) error {
	s.track(t)
	if s.step == nil {
		return errors.New("internal: this format writes steps")
	}
	return s.step(st)
}

func (s *sink) track(t int64) {
	if s.rows == 0 || t < s.first {
		s.first = t
	}
	if s.rows == 0 || t > s.last {
		s.last = t
	}
	s.rows++
}

func (s *sink) note(format string, args ...any) {
	s.m.Notes = append(s.m.Notes, fmt.Sprintf(format, args...))
}

func (s *sink) detail(k, v string) {
	if s.m.Source.Detail == nil {
		s.m.Source.Detail = map[string]string{}
	}
	s.m.Source.Detail[k] = v
}

// traceRequest is row n of an arrival trace (Azure, Mooncake): the trace
// records when a request came and its token counts, never how it ran.
func traceRequest(n int, arrivalNs, promptTokens, outputTokens int64) datasets.Request {
	return datasets.Request{
		ReqID:            fmt.Sprintf("%06d", n),
		ArrivalNs:        arrivalNs,
		PromptTokens:     promptTokens,
		OutputTokens:     outputTokens,
		FirstScheduledNs: datasets.Unknown,
		FirstTokenNs:     datasets.Unknown,
		FinishNs:         datasets.Unknown,
		Status:           datasets.StatusNotRun,
	}
}

// input is an opened source: a file on disk or an embedded file. Reads go
// through a SHA-256 and a byte counter.
type input struct {
	name    string // for error messages: the file's base name
	display string // for the manifest: the path as given, or embedded:NAME
	dir     string // directory of a disk source ("" for embedded)
	embed   string // embedded dataset name
	size    int64  // -1 when unknown

	siblings map[string][]byte // in-memory inputs (tests, fuzzing)

	rc       io.ReadCloser
	h        hash.Hash
	n        int64
	progress func(int64)
	lastProg int64
}

func openInput(src, format string) (*input, error) {
	if src == "" {
		return nil, errors.New("no source given")
	}
	if strings.HasPrefix(src, embedded.Prefix) {
		d, err := embedded.Lookup(src)
		if err != nil {
			return nil, err
		}
		if d.Format != format {
			return nil, fmt.Errorf("%s is a %s trace, not %s (try: steplab import %s %s)", src, d.Format, format, d.Format, src)
		}
		rc, err := embedded.Open(d.Name)
		if err != nil {
			return nil, err
		}
		return &input{name: d.Main, display: embedded.Prefix + d.Name, embed: d.Name, size: -1, rc: rc, h: sha256.New()}, nil
	}
	path := src
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		if format != "vllm-requests" {
			return nil, fmt.Errorf("%s is a directory; the %s importer reads one file", src, format)
		}
		path = filepath.Join(path, "requests.jsonl")
		if st, err = os.Stat(path); err != nil {
			return nil, fmt.Errorf("%s: no requests.jsonl in this directory", src)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &input{name: filepath.Base(path), display: src, dir: filepath.Dir(path), size: st.Size(), rc: f, h: sha256.New()}, nil
}

func (in *input) Read(p []byte) (int, error) {
	n, err := in.rc.Read(p)
	if n > 0 {
		in.h.Write(p[:n])
		in.n += int64(n)
		if in.progress != nil && in.n-in.lastProg >= 1<<16 {
			in.lastProg = in.n
			in.progress(in.n)
		}
	}
	return n, err
}

// drain reads what the parser left so that the SHA-256 covers the whole file.
func (in *input) drain() error {
	_, err := io.Copy(io.Discard, in)
	if in.progress != nil {
		in.progress(in.n)
	}
	return err
}

func (in *input) sum() string { return hex.EncodeToString(in.h.Sum(nil)) }

func (in *input) Close() error { return in.rc.Close() }

// sibling reads a file next to the source (meta.json beside requests.jsonl).
// The error wraps fs.ErrNotExist when there is none.
func (in *input) sibling(name string) ([]byte, error) {
	if in.siblings != nil || (in.embed == "" && in.dir == "") {
		if b, ok := in.siblings[name]; ok {
			return b, nil
		}
		return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	if in.embed != "" {
		rc, err := embedded.OpenFile(in.embed, name)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
	return os.ReadFile(filepath.Join(in.dir, name))
}

// lineError is a located input error: "file:line: problem".
func lineError(file string, line int, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", file, line, fmt.Sprintf(format, args...))
}

// secondsToNs converts a duration or offset in seconds to integer
// nanoseconds, refusing values that are not finite or do not fit.
func secondsToNs(s float64) (int64, bool) {
	if math.IsNaN(s) || math.IsInf(s, 0) || math.Abs(s) > 9e9 {
		return 0, false
	}
	return int64(math.Round(s * 1e9)), true
}

// addSortedRequests adds the requests of rows (req) to the requests table,
// sorted stably by arrival (key), and notes how many came earlier than the
// row before them in the source, and why the source is out of order.
func addSortedRequests[T any](rows []T, key func(T) int64, req func(T) datasets.Request, s *sink, why string) error {
	reordered := 0
	for i := 1; i < len(rows); i++ {
		if key(rows[i]) < key(rows[i-1]) {
			reordered++
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return key(rows[i]) < key(rows[j]) })
	if reordered > 0 {
		s.note("rows sorted by arrival_ns: %d rows of the source arrived before the row above them (%s)", reordered, why)
	}
	for _, rw := range rows {
		if err := s.addRequest(req(rw)); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// bytesInput is an in-memory source named name, with optional sibling files.
func bytesInput(name string, b []byte, siblings map[string][]byte) *input {
	return &input{name: name, display: name, size: int64(len(b)), siblings: siblings,
		rc: io.NopCloser(bytes.NewReader(b)), h: sha256.New()}
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
