package datasets

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	kzstd "github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/encoding/bytestreamsplit"
	"github.com/parquet-go/parquet-go/encoding/delta"
	"github.com/parquet-go/parquet-go/encoding/plain"
	"github.com/parquet-go/parquet-go/encoding/rle"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/steplab/steplab/internal/inflight"
)

// Writer creates a dataset directory. Tables are written through
// TableWriters; the manifest is rewritten (atomically) each time a part
// completes, so an interrupted run leaves a readable, partial dataset.
type Writer struct {
	dir   string // where the parts are written
	final string // where the dataset ends up: dir, or the dataset it replaces

	mu      sync.Mutex
	m       Manifest
	open    map[string]bool
	tables  map[string]tableAborter
	closed  bool
	aborted bool
	hold    bool
	held    []heldPart // parts completed since the last Commit, in hold mode

	pipe *pipeline // the encoders of pipelined tables; nil: none
}

// heldPart is a completed part still under its temporary name.
type heldPart struct {
	table, tmp, final string
	info              PartInfo
}

type tableAborter interface{ abort() }

// CreateOptions tune Create.
type CreateOptions struct {
	// Overwrite replaces an existing dataset at the path when the new one
	// is complete (Close). A directory that is not a steplab dataset (no
	// manifest.json) is never replaced.
	Overwrite bool
	// Encoders is the number of goroutines that encode completed parts
	// while the caller fills the next ones (see TableWriter); 0 encodes
	// each part on the caller's goroutine. The dataset does not depend on
	// it. EncodersFor picks it from the processors at hand.
	Encoders int
}

// Create starts a dataset at dir with the given manifest (its
// SchemaVersion, Status and Tables are managed by the writer). dir must not
// exist or be empty unless opts.Overwrite is set and dir holds a dataset;
// then the new dataset is written beside it (StagingPath "replacing") and
// takes its place only at Close, so a run that fails or is killed leaves
// the old dataset whole. Leftovers of killed runs into dir are removed
// first.
func Create(dir string, m Manifest, opts CreateOptions) (*Writer, error) {
	final := dir
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return nil, fmt.Errorf("%s: exists and is not a directory", dir)
	}
	if err := RemoveLeftovers(dir); err != nil {
		return nil, fmt.Errorf("%s: removing what an interrupted run left: %w", dir, err)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		if !opts.Overwrite {
			return nil, fmt.Errorf("%s: already exists and is not empty (use --force to overwrite)", dir)
		}
		if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err != nil {
			return nil, fmt.Errorf("%s: refusing to overwrite a directory that is not a steplab dataset (no %s)", dir, ManifestFile)
		}
		dir = StagingPath(dir, "replacing")
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		if err := inflight.Track(dir); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	m.SchemaVersion = SchemaVersion
	m.Status = DatasetPartial
	if m.Name == "" {
		m.Name = filepath.Base(filepath.Clean(final))
	}
	m.Tables = map[string]TableInfo{}
	w := &Writer{dir: dir, final: final, m: m, open: map[string]bool{}, tables: map[string]tableAborter{}}
	if err := WriteManifest(dir, &w.m); err != nil {
		return nil, err
	}
	if opts.Encoders > 0 {
		w.pipe = startPipeline(w, opts.Encoders)
	}
	return w, nil
}

// Dir is the directory the parts are written to: the dataset's, or while
// it replaces one, its staging directory beside it.
func (w *Writer) Dir() string { return w.dir }

// Manifest returns a copy of the manifest as last written.
func (w *Writer) Manifest() Manifest {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.m
	m.Tables = make(map[string]TableInfo, len(w.m.Tables))
	for k, v := range w.m.Tables {
		v.Parts = append([]PartInfo(nil), v.Parts...)
		m.Tables[k] = v
	}
	return m
}

// UpdateManifest lets the caller amend provenance (hardware found during a
// capture, notes) while the dataset is being written. Changes to
// SchemaVersion, Status and Tables are ignored.
func (w *Writer) UpdateManifest(f func(m *Manifest)) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, st, tables := w.m.SchemaVersion, w.m.Status, w.m.Tables
	f(&w.m)
	w.m.SchemaVersion, w.m.Status, w.m.Tables = v, st, tables
	return WriteManifest(w.dir, &w.m)
}

// Close marks the dataset complete. Every table writer must be closed
// first. Close is idempotent; after Abort it returns an error and the
// dataset stays partial.
func (w *Writer) Close() error {
	if err := w.openTables(); err != nil {
		return err
	}
	if err := w.pipe.drain(); err != nil {
		_ = w.Abort(err.Error())
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.aborted {
		return fmt.Errorf("dataset %s: %w", w.dir, errWriterAborted)
	}
	if w.closed {
		return nil
	}
	if err := w.listHeld(); err != nil {
		return err
	}
	w.closed = true
	w.m.Status = DatasetComplete
	if err := WriteManifest(w.dir, &w.m); err != nil || w.dir == w.final {
		return err
	}
	if err := ReplaceDir(w.dir, w.final); err != nil {
		return fmt.Errorf("dataset %s: replacing it with %s: %w", w.final, w.dir, err)
	}
	inflight.Done(w.dir)
	w.dir = w.final
	return nil
}

// openTables fails when w was aborted or a table of w is still open.
func (w *Writer) openTables() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.aborted {
		return fmt.Errorf("dataset %s: %w", w.dir, errWriterAborted)
	}
	var open []string
	for t, o := range w.open {
		if o {
			open = append(open, t)
		}
	}
	if len(open) > 0 {
		sort.Strings(open)
		return fmt.Errorf("dataset %s: tables still open: %v", w.dir, open)
	}
	return nil
}

// Abort leaves the dataset partial, recording why in the manifest's notes
// (a dataset that was to replace another stays at its staging name, the
// old one untouched, until the next run into the path). Completed parts
// stay; the open part of every table still open is
// discarded and those table writers fail from then on. Abort after Close
// is a no-op (the dataset stays complete), so `defer w.Abort(...)` is safe.
func (w *Writer) Abort(reason string) error {
	// Parts handed to the encoders were complete for their tables: they
	// are written and stay, as the sequential writer's would.
	_ = w.pipe.drain()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.aborted {
		return nil
	}
	w.aborted = true
	for _, t := range w.tables {
		t.abort()
	}
	err := w.listHeld() // held parts are complete: they stay
	w.m.Status = DatasetPartial
	if reason != "" {
		w.m.Notes = append(w.m.Notes, "partial: "+reason)
	}
	return errors.Join(err, WriteManifest(w.dir, &w.m))
}

// Hold makes the tables of w advance together: from now on a completed
// part keeps its temporary name (which readers ignore) until Commit
// renames it and lists it. A writer whose tables refer to each other
// (step_requests to steps) commits at a row that ends a step, so a reader
// of a killed run sees every table cut at the same step.
func (w *Writer) Hold() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hold = true
}

// Commit renames the parts completed since the last Commit and lists them
// in the manifest, rewritten once. Without Hold, parts are committed as
// they complete and Commit does nothing.
func (w *Writer) Commit() error {
	if w.pipe != nil {
		return w.pipe.commit()
	}
	return w.commitHeld()
}

// commitHeld is Commit once the parts before it are written.
func (w *Writer) commitHeld() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.held) == 0 {
		return nil
	}
	if err := w.listHeld(); err != nil {
		return err
	}
	return WriteManifest(w.dir, &w.m)
}

// listHeld renames the held parts and lists them in w.m, in the order they
// completed; the caller writes the manifest.
func (w *Writer) listHeld() error {
	for i, p := range w.held {
		if err := os.Rename(p.tmp, p.final); err != nil {
			w.held = w.held[i:]
			return err
		}
		inflight.Done(p.tmp)
		ti := w.m.Tables[p.table]
		ti.Parts = append(ti.Parts, p.info)
		ti.Rows += p.info.Rows
		w.m.Tables[p.table] = ti
	}
	w.held = nil
	return nil
}

// partDone takes a part completed under its temporary name: renamed and
// listed at once, or held until Commit.
func (w *Writer) partDone(p heldPart) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.held = append(w.held, p)
	if w.hold {
		return nil
	}
	if err := w.listHeld(); err != nil {
		return err
	}
	return WriteManifest(w.dir, &w.m)
}

// TableOptions tune a TableWriter.
type TableOptions struct {
	// RowGroupRows is the number of rows per Parquet row group.
	RowGroupRows int
	// PartRows closes the open part and starts a new one after this many
	// rows; an interrupted writer loses at most this many rows.
	PartRows int64
}

// PartRows is the part size of bulk writers: a killed writer (SIGKILL, a
// crash, a full disk) loses at most its open part, about 65,536 rows of
// each table, and keeps every part before it.
const PartRows = 1 << 16

// DefaultTableOptions suit bulk writers (simulate, import): one row group
// per part.
var DefaultTableOptions = TableOptions{RowGroupRows: PartRows, PartRows: PartRows}

// TableWriter streams rows of type T into a table of a dataset, as numbered
// part files. A part is written under a hidden temporary name
// (.part-NNNNNN.parquet.tmp) and renamed when complete; only then is it
// listed in the manifest. Memory use is bounded by one row group and does
// not grow with the table.
//
// Flat row types (int32, int64, float64, bool, string and []int64 list
// fields, as Step, StepRequest, Request and GPUSample) are written by a
// columnar encoder that gathers each column straight from the rows; other
// types go through parquet-go's generic writer. Both write plain Parquet
// with zstd pages.
//
// When the Writer has encoders (CreateOptions.Encoders), a table of flat
// rows without list fields keeps the open part's rows and hands them, once
// the part is complete, to an encoder goroutine, which gathers, encodes,
// compresses and writes the part while the caller fills the next one. The
// files, and the order in which parts are listed, are those of the
// sequential writer; memory is bounded by the parts in flight.
//
// A TableWriter is not safe for concurrent use; different tables of one
// Writer may be written from different goroutines.
type TableWriter[T any] struct {
	w     *Writer
	table string
	opts  TableOptions
	codec *rowCodec

	part     int
	file     *partFile // the open part (sequential)
	pw       *parquet.GenericWriter[T]
	partRows int64
	prior    int64 // rows in the parts before the open one
	pending  []T   // rows batched by Append
	err      error
	// spares are finished parts' buffers and column writers, for the next.
	spares chan *partFile

	// A pipelined table keeps the open part's rows (nil: no part open) and
	// recycles the row buffers of encoded parts through free.
	pipelined bool
	rows      []T
	free      chan []T
	partCap   int // the most rows a part has had: a new buffer's room
}

// partFile is a part being written under its temporary name: the file, the
// hash and count of the bytes that went into it, and the column writer
// encoding it (nil for row types parquet-go writes).
type partFile struct {
	f       *os.File
	buf     *bufio.Writer
	h       hash.Hash
	counter countingWriter
	cw      *colFileWriter
}

// TableDir is the directory holding a table's parts: <dir>/<table>.parquet/.
func TableDir(dir, table string) string { return filepath.Join(dir, table+".parquet") }

// NewTableWriter starts writing table in w. A table can be opened once.
func NewTableWriter[T any](w *Writer, table string, opts TableOptions) (*TableWriter[T], error) {
	if opts.RowGroupRows <= 0 {
		opts.RowGroupRows = DefaultTableOptions.RowGroupRows
	}
	if opts.PartRows <= 0 {
		opts.PartRows = DefaultTableOptions.PartRows
	}
	if table == "" || strings.ContainsAny(table, `/\`) || strings.HasPrefix(table, ".") {
		return nil, fmt.Errorf("dataset %s: bad table name %q", w.dir, table)
	}
	codec, _ := codecFor(reflect.TypeFor[T]())
	t := &TableWriter[T]{w: w, table: table, opts: opts, codec: codec, spares: make(chan *partFile, 1)}
	if w.pipe != nil && codec != nil && !codec.hasList {
		// Rows with list fields stay sequential: their slices belong to
		// the caller once Write returns.
		t.pipelined = true
		t.spares = make(chan *partFile, w.pipe.inFlight)
		t.free = make(chan []T, w.pipe.inFlight)
	}
	w.mu.Lock()
	if w.closed || w.aborted {
		w.mu.Unlock()
		return nil, fmt.Errorf("dataset %s: writer already closed", w.dir)
	}
	if _, seen := w.open[table]; seen {
		w.mu.Unlock()
		return nil, fmt.Errorf("dataset %s: table %s opened twice", w.dir, table)
	}
	w.open[table] = true
	w.tables[table] = t
	w.mu.Unlock()
	if err := os.MkdirAll(TableDir(w.dir, table), 0o755); err != nil {
		return nil, err
	}
	return t, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func partName(n int) string {
	return fmt.Sprintf("part-%06d.parquet", n)
}

func (t *TableWriter[T]) tmpPath(n int) string {
	return filepath.Join(TableDir(t.w.dir, t.table), "."+partName(n)+".tmp")
}

// kv is the key-value metadata every part of the table carries.
func (t *TableWriter[T]) kv() []format.KeyValue {
	return []format.KeyValue{
		{Key: KeySchemaVersion, Value: strconv.Itoa(SchemaVersion)},
		{Key: KeyTable, Value: t.table},
	}
}

// spare returns a finished part's buffers and column writer, or nil.
func (t *TableWriter[T]) spare() *partFile {
	select {
	case p := <-t.spares:
		return p
	default:
		return nil
	}
}

// createPart creates part n's temporary file and, for flat rows, its
// column writer, reusing p's buffers and encoders when p is not nil.
func (t *TableWriter[T]) createPart(n int, p *partFile) (*partFile, error) {
	f, err := inflight.Create(t.tmpPath(n))
	if err != nil {
		return nil, err
	}
	if p == nil {
		p = &partFile{buf: bufio.NewWriterSize(nil, 1<<20), h: sha256.New()}
	}
	p.f = f
	p.h.Reset()
	p.buf.Reset(io.MultiWriter(f, p.h))
	p.counter = countingWriter{w: p.buf}
	if t.codec == nil {
		return p, nil
	}
	if p.cw != nil {
		err = p.cw.reset(&p.counter, t.kv())
	} else {
		p.cw, err = newColFileWriter(&p.counter, t.codec, t.opts.RowGroupRows, t.kv())
	}
	if err != nil {
		p.discard()
		return nil, err
	}
	return p, nil
}

// discard drops the part's temporary file.
func (p *partFile) discard() {
	if p.f != nil {
		name := p.f.Name()
		p.f.Close()
		removeTemp(name)
		p.f = nil
	}
}

// finishPart completes p as part n holding rows rows (its column writer's
// footer, the buffered bytes, fsync, close) and returns it, still under
// its temporary name; p's buffers go back to the spares.
func (t *TableWriter[T]) finishPart(p *partFile, n int, rows int64) (heldPart, error) {
	var err error
	if p.cw != nil {
		err = p.cw.close()
	}
	if err == nil {
		err = p.buf.Flush()
	}
	if err == nil {
		err = p.f.Sync()
	}
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	tmp := p.f.Name()
	p.f = nil
	if err != nil {
		removeTemp(tmp)
		return heldPart{}, fmt.Errorf("%s: finishing part %d: %w", t.table, n, err)
	}
	final := filepath.Join(TableDir(t.w.dir, t.table), partName(n))
	rel, _ := filepath.Rel(t.w.dir, final)
	info := PartInfo{File: filepath.ToSlash(rel), Rows: rows, Bytes: p.counter.n, SHA256: hex.EncodeToString(p.h.Sum(nil))}
	select {
	case t.spares <- p:
	default:
	}
	return heldPart{table: t.table, tmp: tmp, final: final, info: info}, nil
}

func (t *TableWriter[T]) openPart() error {
	if t.pipelined {
		select {
		case t.rows = <-t.free:
		default:
			// As large as the largest part so far, so that only the
			// first parts grow theirs.
			t.rows = make([]T, 0, max(int(min(t.opts.PartRows, 1<<12)), t.partCap))
		}
		return nil
	}
	p, err := t.createPart(t.part, t.spare())
	if err != nil {
		return err
	}
	t.file = p
	if t.codec != nil {
		return nil
	}
	opts := []parquet.WriterOption{
		parquet.Compression(zstdCodec),
		parquet.MaxRowsPerRowGroup(int64(t.opts.RowGroupRows)),
		parquet.CreatedBy("steplab", "datasets", ""),
	}
	for _, e := range t.kv() {
		opts = append(opts, parquet.KeyValueMetadata(e.Key, e.Value))
	}
	t.pw = parquet.NewGenericWriter[T](&p.counter, opts...)
	return nil
}

// Parquet key-value metadata keys every part carries.
const (
	KeySchemaVersion = "steplab.schema_version"
	KeyTable         = "steplab.table"
)

var errWriterClosed = errors.New("table writer closed")
var errWriterAborted = errors.New("dataset writer aborted")

// open reports whether a part is open.
func (t *TableWriter[T]) open() bool { return t.file != nil || t.rows != nil }

func (t *TableWriter[T]) ready() error {
	if t.err != nil {
		if t.err == errWriterClosed || t.err == errWriterAborted {
			return fmt.Errorf("dataset %s: table %s: %w", t.w.dir, t.table, t.err)
		}
		return t.err
	}
	if t.pipelined {
		if t.err = t.w.pipe.failed(); t.err != nil {
			t.discard()
			return t.err
		}
	}
	if !t.open() {
		if t.err = t.openPart(); t.err != nil {
			return t.err
		}
	}
	return nil
}

// Next lends the caller the n rows after those written so far, as they
// are, to fill in place: given to Write (or WriteRow) next, they are kept
// without being copied, and the caller must not touch them after. Rows
// lent but not written are lent again by the next call. It returns nil
// after an error (which Write then returns).
func (t *TableWriter[T]) Next(n int) []T {
	buf := &t.pending
	if t.pipelined {
		if (t.rows == nil || t.err != nil) && t.ready() != nil {
			return nil
		}
		buf = &t.rows
	} else if len(t.pending)+n > max(cap(t.pending), gatherRows) {
		if t.flushPending() != nil {
			return nil
		}
	}
	l := len(*buf)
	*buf = slices.Grow(*buf, max(n, gatherRows-l))
	return (*buf)[l : l+n : l+n]
}

// keepLent keeps rows in place when they are the rows Next lent.
func (t *TableWriter[T]) keepLent(rows []T) bool {
	buf := &t.pending
	if t.pipelined {
		buf = &t.rows
	}
	l := len(*buf)
	if len(rows) == 0 || t.err != nil || l+len(rows) > cap(*buf) || &rows[0] != &(*buf)[:l+1][l] ||
		t.pipelined && t.partRows+int64(len(rows)) > t.opts.PartRows {
		return false
	}
	*buf = (*buf)[:l+len(rows)]
	if t.pipelined {
		t.partRows += int64(len(rows))
	}
	return true
}

// Write appends rows. Parts roll over at opts.PartRows. After an error the
// table writer is unusable: every later call returns the same error.
func (t *TableWriter[T]) Write(rows []T) error {
	if t.keepLent(rows) {
		switch {
		case !t.pipelined && len(t.pending) >= gatherRows:
			return t.flushPending()
		case t.pipelined && t.partRows >= t.opts.PartRows:
			return t.Checkpoint()
		}
		return nil
	}
	if !t.pipelined && len(rows) < gatherRows && t.codec != nil && !t.codec.hasList &&
		t.partRows+int64(len(t.pending)+len(rows)) < t.opts.PartRows {
		// A few flat rows (a step recorded by a caller that is not
		// lent rows) are copied into the batch: gathering them alone
		// would cost a pass of every column per call. Rows that
		// complete a part go through at once, as they always did.
		if t.err != nil {
			return t.ready()
		}
		t.pending = append(t.pending, rows...)
		if len(t.pending) >= gatherRows {
			return t.flushPending()
		}
		return nil
	}
	return t.write(rows)
}

// WriteRow is Write of the one row at row.
func (t *TableWriter[T]) WriteRow(row *T) error { return t.Write(unsafe.Slice(row, 1)) }

func (t *TableWriter[T]) write(rows []T) error {
	if len(rows) > 0 && len(t.pending) > 0 { // rows batched before these go first
		if err := t.flushPending(); err != nil {
			return err
		}
	}
	for len(rows) > 0 {
		if err := t.ready(); err != nil {
			return err
		}
		n := int64(len(rows))
		if room := t.opts.PartRows - t.partRows; n > room {
			n = room
		}
		if err := t.writeRows(rows[:n]); err != nil {
			t.err = fmt.Errorf("%s: write: %w", t.table, err)
			t.discard()
			return t.err
		}
		t.partRows += n
		rows = rows[n:]
		if t.partRows >= t.opts.PartRows {
			if t.err = t.Checkpoint(); t.err != nil {
				return t.err
			}
		}
	}
	return nil
}

// Append writes one row. The row is copied (into a small batch, or into
// the column buffers when T has list fields), so the caller may reuse the
// row and its slices at once; Append does not allocate per row. Rows
// appended are durable once their part completes, like rows given to Write.
func (t *TableWriter[T]) Append(row T) error {
	if t.codec == nil || t.codec.hasList {
		if t.codec == nil {
			return t.write([]T{row})
		}
		if t.partRows+1 >= t.opts.PartRows {
			return t.write([]T{row})
		}
		if err := t.ready(); err != nil {
			return err
		}
		if err := t.file.cw.appendRows(unsafe.Pointer(&row), 1); err != nil {
			t.err = fmt.Errorf("%s: write: %w", t.table, err)
			t.discard()
			return t.err
		}
		t.partRows++
		return nil
	}
	if t.err != nil {
		return t.ready()
	}
	if t.pending == nil {
		t.pending = make([]T, 0, gatherRows)
	}
	t.pending = append(t.pending, row)
	if len(t.pending) == cap(t.pending) {
		return t.flushPending()
	}
	return nil
}

// flushPending writes the rows batched by Append.
func (t *TableWriter[T]) flushPending() error {
	if len(t.pending) == 0 {
		return nil
	}
	rows := t.pending
	t.pending = t.pending[:0]
	return t.write(rows)
}

func (t *TableWriter[T]) writeRows(rows []T) error {
	switch {
	case t.pipelined:
		t.rows = append(t.rows, rows...)
	case t.file.cw != nil:
		return t.file.cw.appendRows(unsafe.Pointer(unsafe.SliceData(rows)), len(rows))
	default:
		for i := 0; i < len(rows); i += gatherRows {
			if _, err := t.pw.Write(rows[i:min(i+gatherRows, len(rows))]); err != nil {
				return err
			}
		}
	}
	return nil
}

// Rows is the number of rows written to the table so far, in completed
// parts and the open one.
func (t *TableWriter[T]) Rows() int64 {
	return t.prior + t.partRows + int64(len(t.pending))
}

// Checkpoint closes the open part, making every row written so far durable
// (for a pipelined table: once its encoder has written it). Captures call
// it periodically; it is a no-op when no rows are pending.
func (t *TableWriter[T]) Checkpoint() error {
	if err := t.flushPending(); err != nil {
		return err
	}
	if t.err != nil {
		return t.err
	}
	if !t.open() {
		return nil
	}
	n, rows := t.part, t.partRows
	t.part++
	t.prior += rows
	t.partRows = 0
	if t.pipelined {
		t.err = t.submit(n, rows)
		return t.err
	}
	p := t.file
	t.file = nil
	var hp heldPart
	var err error
	if t.pw != nil {
		err = t.pw.Close()
		t.pw = nil
	}
	if err == nil {
		hp, err = t.finishPart(p, n, rows)
	} else {
		p.discard()
		err = fmt.Errorf("%s: finishing part %d: %w", t.table, n, err)
	}
	if err == nil {
		err = t.w.partDone(hp)
	}
	t.err = err
	return err
}

// submit hands the open part's rows to the Writer's encoders as part n.
func (t *TableWriter[T]) submit(n int, count int64) error {
	rows := t.rows
	t.rows = nil
	t.partCap = max(t.partCap, len(rows))
	return t.w.pipe.submit(func() (heldPart, error) {
		p, err := t.createPart(n, t.spare())
		if err != nil {
			return heldPart{}, err
		}
		if err := p.cw.appendRows(unsafe.Pointer(unsafe.SliceData(rows)), len(rows)); err != nil {
			p.discard()
			return heldPart{}, fmt.Errorf("%s: write: %w", t.table, err)
		}
		hp, err := t.finishPart(p, n, count)
		select {
		case t.free <- rows[:0]:
		default:
		}
		return hp, err
	})
}

// removeTemp removes a temporary part that will not be renamed.
func removeTemp(name string) {
	os.Remove(name)
	inflight.Done(name)
}

// discard drops the open part (its temporary file, or its rows).
func (t *TableWriter[T]) discard() {
	t.pending = t.pending[:0]
	t.rows = nil
	if t.file != nil {
		t.file.discard()
		t.file, t.pw = nil, nil
	}
}

// abort is called by Writer.Abort for a table still open.
func (t *TableWriter[T]) abort() {
	t.discard()
	if t.err == nil {
		t.err = errWriterAborted
	}
}

// Close finishes the table: the open part is completed and listed. A table
// with no rows still gets one (empty) part so that readers see its schema.
// Close is idempotent; after an error it returns that error.
func (t *TableWriter[T]) Close() error {
	if t.err == errWriterClosed {
		return nil
	}
	if t.err != nil {
		return t.err
	}
	if err := t.flushPending(); err != nil {
		return err
	}
	if !t.open() && t.part == 0 {
		if err := t.ready(); err != nil {
			return err
		}
	}
	if err := t.Checkpoint(); err != nil {
		return err
	}
	t.w.mu.Lock()
	t.w.open[t.table] = false
	delete(t.w.tables, t.table)
	t.w.mu.Unlock()
	t.err = errWriterClosed
	return nil
}

// ---- columnar part writer -------------------------------------------------
//
// colFileWriter writes one Parquet file from rows of a flat struct (see
// rowCodec), column by column through field offsets. It produces plain
// Parquet: data pages v1, zstd, DELTA_BINARY_PACKED for int columns tagged
// delta, dictionary encoding for string columns tagged dict, PLAIN
// otherwise, min/max statistics and page indexes (pageindex.go), no
// extension types and no timestamps, so equal rows give byte-identical
// files.

const (
	// pageRows is the number of rows per data page.
	pageRows = 32768
	// gatherRows bounds one pass of a column over the rows, so that the rows
	// read stay in cache while each column gathers its field.
	gatherRows = 256
)

type colFileWriter struct {
	out       io.Writer
	pos       int64
	codec     *rowCodec
	cols      []*colEnc
	rgMax     int
	pageFill  int
	rgFill    int
	rowGroups []format.RowGroup
	indexes   [][]chunkIndex // per row group, per column
	numRows   int64
	kv        []format.KeyValue
	zstd      *kzstd.Encoder
	hdr       bytes.Buffer
	enc       *thrift.Encoder
	body, tmp []byte
	comp      []byte
	err       error
}

type colEnc struct {
	f    *codecField
	typ  format.Type
	path []string

	// values of the page being filled
	i64 []int64
	i32 []int32 // int32 columns, and int64 delta columns while narrow
	// narrow: an int64 delta column, gathered into i32 while its page fits
	// (gatherNarrow); wide: the open page did not fit and is in i64.
	narrow, wide bool
	f64          []float64
	bools        []byte
	plain        []byte
	idx          []int32
	defs         []byte
	reps         []byte
	ents         int
	// Bounds of the open page, kept as its values are gathered so that
	// closing the page does not read them again: integers in lo/hi, floats
	// in flo/fhi (nan: the page holds a NaN), bools as the AND and OR of
	// the page's bytes; nulls counts the empty lists of a list column.
	lo, hi   int64
	flo, fhi float64
	nan      bool
	bAnd     byte
	bOr      byte
	nulls    int64

	// dictionary of the row group (string columns tagged dict)
	dict             map[string]int32
	dictVals         []string
	dictMin, dictMax string // bounds of dictVals
	// recent maps a string's data pointer and length to its dictionary
	// index: rows name the same few hundred strings over and over (the
	// requests of running steps), each time through the same string
	// header, and comparing a pointer is much cheaper than hashing bytes.
	recent *[dictRecent]dictSlot

	// encoded data pages of the row group
	chunk        []byte
	uncompressed int64
	numValues    int64
	valueEnc     format.Encoding
	skip         int              // pages left to store without trying zstd
	pages        []pageIndexEntry // the row group's pages so far
}

var zstdCodec = &zstd.Codec{Level: zstd.SpeedFastest, Concurrency: 1}

// pageEncoder is the column writer's zstd encoder: the fastest level
// without the entropy stage. Its pages are already bit-packed (delta, RLE,
// dictionary indexes), so zstd earns its ratio from long repeats (the same
// requests step after step); Huffman-coding the literals left over took a
// fifth of the compression time for about 1.5% of the size. parquet-go's
// codec does not expose the option, so the encoder it wraps is used
// directly.
func pageEncoder() *kzstd.Encoder {
	e, err := kzstd.NewWriter(nil, kzstd.WithEncoderLevel(kzstd.SpeedFastest), kzstd.WithEncoderConcurrency(1),
		kzstd.WithZeroFrames(true), kzstd.WithEncoderCRC(false), kzstd.WithNoEntropyCompression(true))
	if err != nil {
		panic(err) // only for invalid options
	}
	return e
}

func newColFileWriter(out io.Writer, c *rowCodec, rowGroupRows int, kv []format.KeyValue) (*colFileWriter, error) {
	w := &colFileWriter{out: out, codec: c, rgMax: rowGroupRows, kv: kv, zstd: pageEncoder()}
	w.enc = thrift.NewEncoder(new(thrift.CompactProtocol).NewWriter(&w.hdr))
	for i := range c.fields {
		f := &c.fields[i]
		ce := &colEnc{f: f, path: []string{f.name}}
		// Page buffers get their full size at once: growing them by
		// doubling would copy each one a dozen times per part.
		page := min(pageRows, rowGroupRows)
		switch f.kind {
		case kindInt32:
			ce.typ, ce.valueEnc = format.Int32, format.Plain
			if f.delta {
				ce.valueEnc = format.DeltaBinaryPacked
			}
			ce.i32 = make([]int32, 0, page)
		case kindInt64:
			ce.typ, ce.valueEnc = format.Int64, format.Plain
			if f.delta {
				ce.valueEnc = format.DeltaBinaryPacked
				ce.narrow = true
				ce.i32 = make([]int32, 0, page)
			} else {
				ce.i64 = make([]int64, 0, page)
			}
		case kindInt64List:
			ce.typ, ce.valueEnc = format.Int64, format.Plain
			ce.path = []string{f.name, "list", "element"}
		case kindFloat64:
			ce.typ, ce.valueEnc = format.Double, format.Plain
			if f.split {
				ce.valueEnc = format.ByteStreamSplit
			}
			ce.f64 = make([]float64, 0, page)
		case kindBool:
			ce.typ, ce.valueEnc = format.Boolean, format.Plain
			ce.bools = make([]byte, 0, page)
		case kindString:
			ce.typ, ce.valueEnc = format.ByteArray, format.Plain
			if f.dict {
				ce.valueEnc = format.RLEDictionary
				ce.dict = map[string]int32{}
				ce.recent = new([dictRecent]dictSlot)
				ce.idx = make([]int32, 0, page)
			}
		}
		ce.clearPage()
		w.cols = append(w.cols, ce)
	}
	if err := w.write([]byte("PAR1")); err != nil {
		return nil, err
	}
	return w, nil
}

// reset prepares w for a new file, keeping its buffers.
func (w *colFileWriter) reset(out io.Writer, kv []format.KeyValue) error {
	w.out, w.pos, w.kv, w.err = out, 0, kv, nil
	w.pageFill, w.rgFill, w.numRows, w.rowGroups, w.indexes = 0, 0, 0, nil, nil
	for _, c := range w.cols {
		c.clearPage()
		c.chunk, c.uncompressed, c.numValues, c.skip, c.pages = c.chunk[:0], 0, 0, 0, c.pages[:0]
		if c.dict != nil {
			c.resetDict()
		}
	}
	return w.write([]byte("PAR1"))
}

func (w *colFileWriter) write(b []byte) error {
	if w.err != nil {
		return w.err
	}
	n, err := w.out.Write(b)
	w.pos += int64(n)
	w.err = err
	return err
}

// appendRows adds n rows of the codec's struct type starting at base.
func (w *colFileWriter) appendRows(base unsafe.Pointer, n int) error {
	stride := w.codec.size
	for done := 0; done < n; {
		if w.err != nil {
			return w.err
		}
		k := min(n-done, gatherRows, pageRows-w.pageFill, w.rgMax-w.rgFill)
		// Never form a pointer past the last row: the GC would see it.
		p := unsafe.Add(base, uintptr(done)*stride)
		for _, c := range w.cols {
			c.gather(p, stride, k)
		}
		w.pageFill += k
		w.rgFill += k
		w.numRows += int64(k)
		done += k
		if w.rgFill >= w.rgMax {
			if err := w.flushRowGroup(); err != nil {
				return err
			}
		} else if w.pageFill >= pageRows {
			if err := w.flushPages(); err != nil {
				return err
			}
		}
	}
	return w.err
}

func (c *colEnc) gather(base unsafe.Pointer, stride uintptr, n int) {
	p := unsafe.Add(base, c.f.offset)
	switch c.f.kind {
	case kindInt64:
		if c.narrow && !c.wide {
			c.gatherNarrow(p, stride, n)
		} else {
			c.gatherInt64(p, stride, n)
		}
	case kindInt32:
		l := len(c.i32)
		c.i32 = slices.Grow(c.i32, n)[:l+n]
		dst := c.i32[l:]
		lo, hi := c.lo, c.hi
		off := uintptr(0)
		for i := range dst {
			v := *(*int32)(unsafe.Add(p, off))
			off += stride
			dst[i] = v
			lo, hi = min(lo, int64(v)), max(hi, int64(v))
		}
		c.lo, c.hi = lo, hi
	case kindFloat64:
		l := len(c.f64)
		c.f64 = slices.Grow(c.f64, n)[:l+n]
		dst := c.f64[l:]
		lo, hi, nan := c.flo, c.fhi, c.nan
		off := uintptr(0)
		for i := range dst {
			v := *(*float64)(unsafe.Add(p, off))
			off += stride
			dst[i] = v
			// Plain comparisons (a NaN passes both; the sign of a zero
			// bound is set when the page closes) spare the builtin
			// min/max their NaN and signed-zero cases.
			if v < lo {
				lo = v
			}
			if v > hi {
				hi = v
			}
			nan = nan || v != v
		}
		c.flo, c.fhi, c.nan = lo, hi, nan
	case kindBool:
		l := len(c.bools)
		c.bools = slices.Grow(c.bools, n)[:l+n]
		dst := c.bools[l:]
		and, or := c.bAnd, c.bOr
		off := uintptr(0)
		for i := range dst {
			// A Go bool is the byte 0 or 1: copying it avoids a branch
			// that random flags mispredict.
			b := *(*byte)(unsafe.Add(p, off))
			off += stride
			dst[i] = b
			and, or = and&b, or|b
		}
		c.bAnd, c.bOr = and, or
	case kindString:
		if c.dict == nil {
			for i := 0; i < n; i++ {
				s := *(*string)(unsafe.Add(p, uintptr(i)*stride))
				c.plain = binary.LittleEndian.AppendUint32(c.plain, uint32(len(s)))
				c.plain = append(c.plain, s...)
			}
			break
		}
		l := len(c.idx)
		c.idx = slices.Grow(c.idx, n)[:l+n]
		dst := c.idx[l:]
		off := uintptr(0)
		for i := range dst {
			s := *(*string)(unsafe.Add(p, off))
			off += stride
			ptr := uintptr(unsafe.Pointer(unsafe.StringData(s)))
			slot := &c.recent[(ptr*0x9E3779B97F4A7C15)>>(64-dictRecentBits)]
			if slot.p == ptr && int(slot.n) == len(s)+1 {
				dst[i] = slot.id
				continue
			}
			id, ok := c.dict[s]
			if !ok {
				id = int32(len(c.dictVals))
				c.dict[s] = id
				c.dictVals = append(c.dictVals, s)
				c.noteDictValue(s)
			}
			// Only the bytes dictVals holds are cached: they stay alive,
			// so no other string can take their address while the slot
			// names it (the cache is cleared with the dictionary).
			if unsafe.StringData(c.dictVals[id]) == unsafe.StringData(s) {
				*slot = dictSlot{p: ptr, n: int32(len(s)) + 1, id: id}
			}
			dst[i] = id
		}
	case kindInt64List:
		for i := 0; i < n; i++ {
			l := *(*[]int64)(unsafe.Add(p, uintptr(i)*stride))
			if len(l) == 0 {
				c.reps = append(c.reps, 0)
				c.defs = append(c.defs, 0)
				c.ents++
				c.nulls++
				continue
			}
			c.reps = append(c.reps, 0)
			for range len(l) - 1 {
				c.reps = append(c.reps, 1)
			}
			for range l {
				c.defs = append(c.defs, 1)
			}
			c.i64 = append(c.i64, l...)
			c.ents += len(l)
			for _, v := range l {
				c.lo, c.hi = min(c.lo, v), max(c.hi, v)
			}
		}
		return
	}
	c.ents += n
}

func (c *colEnc) gatherInt64(p unsafe.Pointer, stride uintptr, n int) {
	l := len(c.i64)
	c.i64 = slices.Grow(c.i64, n)[:l+n]
	dst := c.i64[l:]
	lo, hi := c.lo, c.hi
	off := uintptr(0)
	for i := range dst {
		v := *(*int64)(unsafe.Add(p, off))
		off += stride
		dst[i] = v
		lo, hi = min(lo, v), max(hi, v)
	}
	c.lo, c.hi = lo, hi
}

// gatherNarrow gathers an int64 delta column into i32 while the page's
// values fit (see narrowBound). The bounds say whether they did: checking
// them once after the pass spares a compare and branch a value. When a
// value does not fit, the page turns wide: what it holds moves to i64, and
// the rows are gathered again there.
func (c *colEnc) gatherNarrow(p unsafe.Pointer, stride uintptr, n int) {
	l := len(c.i32)
	c.i32 = slices.Grow(c.i32, n)[:l+n]
	dst := c.i32[l:]
	lo, hi := c.lo, c.hi
	off := uintptr(0)
	for i := range dst {
		v := *(*int64)(unsafe.Add(p, off))
		off += stride
		dst[i] = int32(v)
		lo, hi = min(lo, v), max(hi, v)
	}
	if lo < -narrowBound || hi >= narrowBound {
		c.i64 = widen(c.i64, c.i32[:l])
		c.i32 = c.i32[:0]
		c.wide = true
		c.gatherInt64(p, stride, n)
		return
	}
	c.lo, c.hi = lo, hi
}

// narrowBound bounds the int64 values a delta page may hold to be encoded
// through parquet-go's int32 path: within ±2^29, every delta and every delta
// less its block's minimum fits in 31 bits, so the int32 encoder writes the
// very bytes the int64 one would (the format does not depend on the
// physical type), and parquet-go vectorizes the int32 path for more bit
// widths. Counts, tokens, bytes and durations qualify; absolute timestamps
// do not.
const narrowBound = 1 << 29

// dictRecent is the size of a dictionary column's pointer cache, direct
// mapped by a multiplicative hash of the pointer: 8192 slots keep the few
// hundred strings of a row group mostly out of each other's way.
const (
	dictRecentBits = 13
	dictRecent     = 1 << dictRecentBits
)

// dictSlot names a string by its data pointer p and its length plus one
// (n): a cleared slot then matches no string, not even an unset one (its
// pointer is nil), which the cache serves like any other: columns such as
// worker_id hold nothing else.
type dictSlot struct {
	p     uintptr
	n, id int32
}

func (c *colEnc) resetDict() {
	clear(c.dict)
	clear(c.recent[:])
	c.dictVals = c.dictVals[:0]
	c.dictMin, c.dictMax = "", ""
}

// flushPages encodes the open page of every column.
func (w *colFileWriter) flushPages() error {
	if w.pageFill == 0 {
		return w.err
	}
	for _, c := range w.cols {
		if err := w.flushPage(c); err != nil {
			w.err = err
			return err
		}
	}
	w.pageFill = 0
	return nil
}

func appendLevels(dst, tmp []byte, levels []byte) ([]byte, []byte, error) {
	var err error
	tmp, err = (&rle.Encoding{BitWidth: 1}).EncodeLevels(tmp, levels)
	if err != nil {
		return dst, tmp, err
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(tmp)))
	return append(dst, tmp...), tmp, nil
}

func (w *colFileWriter) flushPage(c *colEnc) error {
	var err error
	body := w.body[:0]
	tmp := w.tmp
	switch c.f.kind {
	case kindInt64List:
		if body, tmp, err = appendLevels(body, tmp, c.reps); err != nil {
			return err
		}
		if body, tmp, err = appendLevels(body, tmp, c.defs); err != nil {
			return err
		}
		tmp, err = (&plain.Encoding{}).EncodeInt64(tmp, c.i64)
		body = append(body, tmp...)
	// The values alone make the page of a required column: they are
	// encoded straight into body (the encoders overwrite their dst).
	case kindInt64:
		switch {
		case c.narrow && !c.wide:
			body, err = (&delta.BinaryPackedEncoding{}).EncodeInt32(body, c.i32)
		case c.valueEnc == format.DeltaBinaryPacked:
			body, err = (&delta.BinaryPackedEncoding{}).EncodeInt64(body, c.i64)
		default:
			body, err = (&plain.Encoding{}).EncodeInt64(body, c.i64)
		}
	case kindInt32:
		if c.valueEnc == format.DeltaBinaryPacked {
			body, err = (&delta.BinaryPackedEncoding{}).EncodeInt32(body, c.i32)
		} else {
			body, err = (&plain.Encoding{}).EncodeInt32(body, c.i32)
		}
	case kindFloat64:
		if c.valueEnc == format.ByteStreamSplit {
			body, err = (&bytestreamsplit.Encoding{}).EncodeDouble(body, c.f64)
		} else {
			body, err = (&plain.Encoding{}).EncodeDouble(body, c.f64)
		}
	case kindBool:
		body = packBools(body, c.bools)
	case kindString:
		if c.dict == nil {
			body = append(body, c.plain...)
			break
		}
		bw := max(1, bits.Len32(uint32(len(c.dictVals)-1)))
		body = append(body, byte(bw))
		tmp, err = (&rle.Encoding{BitWidth: bw}).EncodeInt32(tmp, c.idx)
		body = append(body, tmp...)
	}
	if err != nil {
		return fmt.Errorf("column %s: encoding page: %w", c.f.name, err)
	}
	w.body, w.tmp = body, tmp
	entry := c.pageBounds()
	entry.offset, entry.firstRow = int64(len(c.chunk)), int64(w.rgFill-w.pageFill)
	hdr := format.PageHeader{
		Type:                 format.DataPage,
		UncompressedPageSize: int32(len(body)),
		DataPageHeader: thrift.New(format.DataPageHeader{
			NumValues:               int32(c.ents),
			Encoding:                c.valueEnc,
			DefinitionLevelEncoding: format.RLE,
			RepetitionLevelEncoding: format.RLE,
		}),
	}
	if err := w.appendPage(&c.chunk, &c.uncompressed, &hdr, body, &c.skip); err != nil {
		return fmt.Errorf("column %s: %w", c.f.name, err)
	}
	entry.size = int32(int64(len(c.chunk)) - entry.offset)
	c.pages = append(c.pages, entry)
	c.numValues += int64(c.ents)
	c.clearPage()
	return nil
}

// packBools appends flags (bytes 0 or 1) to dst as a PLAIN boolean
// bitmap, least significant bit first. Eight flags are read as one word
// and the multiply moves byte k's bit to bit 56+k: no two partial products
// meet, so nothing carries into the top byte. A flag at a time cost as
// much as the rest of the page's encoding.
func packBools(dst, flags []byte) []byte {
	full := len(flags) &^ 7
	for i := 0; i < full; i += 8 {
		dst = append(dst, byte(binary.LittleEndian.Uint64(flags[i:])*0x0102040810204080>>56))
	}
	if full < len(flags) {
		var b byte
		for i, f := range flags[full:] {
			b |= f << i
		}
		dst = append(dst, b)
	}
	return dst
}

// clearPage empties the open page.
func (c *colEnc) clearPage() {
	c.i64, c.i32, c.f64, c.bools, c.plain, c.idx = c.i64[:0], c.i32[:0], c.f64[:0], c.bools[:0], c.plain[:0], c.idx[:0]
	c.defs, c.reps, c.ents, c.wide = c.defs[:0], c.reps[:0], 0, false
	c.lo, c.hi, c.flo, c.fhi, c.nan = math.MaxInt64, math.MinInt64, math.Inf(1), math.Inf(-1), false
	c.bAnd, c.bOr, c.nulls = 1, 0, 0
}

// appendPage compresses body and appends its header and bytes to dst.
// skip (may be nil) is the column's adaptive-compression state: a column
// whose last page did not shrink by an eighth under zstd (random timing
// jitter after delta encoding does not) has its next pages stored as zstd
// frames of raw blocks, trying compression again every rawRetry pages.
// Either way the page is a valid zstd frame.
func (w *colFileWriter) appendPage(dst *[]byte, uncompressed *int64, hdr *format.PageHeader, body []byte, skip *int) error {
	var comp []byte
	if skip != nil && *skip > 0 {
		*skip--
		comp = appendZstdRaw(w.comp[:0], body)
	} else {
		comp = w.zstd.EncodeAll(body, w.comp[:0])
		if skip != nil && len(comp) > len(body)-len(body)/8 {
			*skip = rawRetry
		}
	}
	w.comp = comp
	hdr.CompressedPageSize = int32(len(comp))
	// A CRC of the page as stored lets readers (parquet-go checks it) refuse
	// a damaged page before decoding it.
	hdr.CRC = int32(crc32.ChecksumIEEE(comp))
	w.hdr.Reset()
	if err := w.enc.Encode(hdr); err != nil {
		return err
	}
	*dst = append(*dst, w.hdr.Bytes()...)
	*dst = append(*dst, comp...)
	*uncompressed += int64(w.hdr.Len() + len(body))
	return nil
}

func (w *colFileWriter) flushRowGroup() error {
	if w.rgFill == 0 {
		return w.err
	}
	if err := w.flushPages(); err != nil {
		return err
	}
	rg := format.RowGroup{NumRows: int64(w.rgFill), FileOffset: w.pos, Ordinal: int16(len(w.rowGroups))}
	index := make([]chunkIndex, 0, len(w.cols))
	for _, c := range w.cols {
		start := w.pos
		var dictOff int64
		uncompressed := c.uncompressed
		encs := []format.Encoding{c.valueEnc}
		if c.dict != nil {
			body := w.body[:0]
			for _, s := range c.dictVals {
				body = binary.LittleEndian.AppendUint32(body, uint32(len(s)))
				body = append(body, s...)
			}
			w.body = body
			var page []byte
			hdr := format.PageHeader{
				Type:                 format.DictionaryPage,
				UncompressedPageSize: int32(len(body)),
				DictionaryPageHeader: thrift.New(format.DictionaryPageHeader{NumValues: int32(len(c.dictVals)), Encoding: format.Plain}),
			}
			if err := w.appendPage(&page, &uncompressed, &hdr, body, nil); err != nil {
				w.err = err
				return err
			}
			dictOff = w.pos
			if err := w.write(page); err != nil {
				return err
			}
			encs = []format.Encoding{format.Plain, format.RLEDictionary}
		}
		if c.f.kind == kindInt64List {
			encs = append(encs, format.RLE)
		}
		dataOff := w.pos
		if err := w.write(c.chunk); err != nil {
			return err
		}
		ci := chunkIndex{pages: slices.Clone(c.pages), dataAt: dataOff}
		for _, p := range c.pages {
			ci.noBounds = ci.noBounds || p.nan
		}
		index = append(index, ci)
		rg.Columns = append(rg.Columns, format.ColumnChunk{
			FileOffset: start,
			MetaData: format.ColumnMetaData{
				Type:                  c.typ,
				Encoding:              encs,
				PathInSchema:          c.path,
				Codec:                 format.Zstd,
				NumValues:             c.numValues,
				TotalUncompressedSize: uncompressed,
				TotalCompressedSize:   w.pos - start,
				DataPageOffset:        dataOff,
				DictionaryPageOffset:  dictOff,
				Statistics:            ci.statistics(c.f.kind),
			},
		})
		rg.TotalByteSize += uncompressed
		c.chunk, c.uncompressed, c.numValues, c.pages = c.chunk[:0], 0, 0, c.pages[:0]
		if c.dict != nil {
			c.resetDict()
		}
	}
	rg.TotalCompressedSize = w.pos - rg.FileOffset
	w.rowGroups = append(w.rowGroups, rg)
	w.indexes = append(w.indexes, index)
	w.rgFill = 0
	return w.err
}

// schemaElements is the Parquet schema of the codec's struct.
func (c *rowCodec) schemaElements() []format.SchemaElement {
	els := []format.SchemaElement{{Name: "schema", NumChildren: thrift.New(int32(len(c.fields)))}}
	req := thrift.New(format.Required)
	for _, f := range c.fields {
		switch f.kind {
		case kindInt32:
			els = append(els, format.SchemaElement{Name: f.name, Type: thrift.New(format.Int32), RepetitionType: req})
		case kindInt64:
			els = append(els, format.SchemaElement{Name: f.name, Type: thrift.New(format.Int64), RepetitionType: req})
		case kindFloat64:
			els = append(els, format.SchemaElement{Name: f.name, Type: thrift.New(format.Double), RepetitionType: req})
		case kindBool:
			els = append(els, format.SchemaElement{Name: f.name, Type: thrift.New(format.Boolean), RepetitionType: req})
		case kindString:
			els = append(els, format.SchemaElement{Name: f.name, Type: thrift.New(format.ByteArray), RepetitionType: req,
				ConvertedType: thrift.New(deprecated.UTF8), LogicalType: format.LogicalType{Value: &format.StringType{}}})
		case kindInt64List:
			els = append(els,
				format.SchemaElement{Name: f.name, RepetitionType: req, NumChildren: thrift.New(int32(1)),
					ConvertedType: thrift.New(deprecated.List), LogicalType: format.LogicalType{Value: &format.ListType{}}},
				format.SchemaElement{Name: "list", RepetitionType: thrift.New(format.Repeated), NumChildren: thrift.New(int32(1))},
				format.SchemaElement{Name: "element", Type: thrift.New(format.Int64), RepetitionType: req},
			)
		}
	}
	return els
}

// close writes the last row group, the page indexes and the footer.
func (w *colFileWriter) close() error {
	if err := w.flushRowGroup(); err != nil {
		return err
	}
	if err := w.writePageIndexes(); err != nil {
		return err
	}
	orders := make([]format.ColumnOrder, len(w.cols))
	for i := range orders {
		orders[i] = format.ColumnOrder{Value: &format.TypeDefinedOrder{}}
	}
	md := format.FileMetaData{
		Version:          2,
		Schema:           w.codec.schemaElements(),
		NumRows:          w.numRows,
		RowGroups:        w.rowGroups,
		KeyValueMetadata: w.kv,
		CreatedBy:        "steplab datasets (schema version " + strconv.Itoa(SchemaVersion) + ")",
		ColumnOrders:     orders,
	}
	footer, err := thrift.Marshal(new(thrift.CompactProtocol), &md)
	if err != nil {
		return err
	}
	footer = binary.LittleEndian.AppendUint32(footer, uint32(len(footer)))
	footer = append(footer, "PAR1"...)
	return w.write(footer)
}

// rawRetry is the number of pages stored raw after a page that zstd could
// not shrink, before compression is tried again.
const rawRetry = 7

// appendZstdRaw appends src to dst as one zstd frame (RFC 8878) made of raw
// blocks: a valid zstd stream any decoder reads, written at memcpy speed.
func appendZstdRaw(dst, src []byte) []byte {
	dst = append(dst, 0x28, 0xB5, 0x2F, 0xFD) // magic
	// Frame header: single segment, content size in 1, 2, 4 or 8 bytes.
	n := uint64(len(src))
	switch {
	case n < 256:
		dst = append(dst, 0<<6|1<<5, byte(n))
	case n < 65536+256:
		dst = append(dst, 1<<6|1<<5)
		dst = binary.LittleEndian.AppendUint16(dst, uint16(n-256))
	case n <= 0xFFFFFFFF:
		dst = append(dst, 2<<6|1<<5)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	default:
		dst = append(dst, 3<<6|1<<5)
		dst = binary.LittleEndian.AppendUint64(dst, n)
	}
	const maxBlock = 128 << 10
	for {
		k := min(len(src), maxBlock)
		last := uint32(0)
		if k == len(src) {
			last = 1
		}
		h := last | 0<<1 | uint32(k)<<3 // block type 0: raw
		dst = append(dst, byte(h), byte(h>>8), byte(h>>16))
		dst = append(dst, src[:k]...)
		src = src[k:]
		if last == 1 {
			return dst
		}
	}
}
