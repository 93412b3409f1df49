package datasets

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/parquet-go/parquet-go/format"

	"github.com/steplab/steplab/datasets/internal/pq"
	"github.com/steplab/steplab/internal/inflight"
	"github.com/steplab/steplab/internal/iocount"
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
	if err := inflight.MkdirAll(dir, 0o755); err != nil {
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
// rows keeps the open part's rows (their list fields copied into the
// part's own memory) and hands them, once the part is complete, to an
// encoder goroutine, which gathers, encodes, compresses and writes the
// part while the caller fills the next one. The files, and the order in
// which parts are listed, are those of the sequential writer; memory is
// bounded by the parts in flight.
//
// A TableWriter is not safe for concurrent use; different tables of one
// Writer may be written from different goroutines.
type TableWriter[T any] struct {
	w     *Writer
	table string
	opts  TableOptions
	codec *pq.Codec

	part     int
	file     *partFile // the open part (sequential)
	pw       *parquet.GenericWriter[T]
	partRows int64
	prior    int64 // rows in the parts before the open one
	pending  []T   // rows batched by Append
	one      []T   // WriteRow's copy of a row Next did not lend
	err      error
	// spares are finished parts' buffers and column writers, for the next.
	spares chan *partFile

	// A pipelined table keeps the open part's rows (nil: no part open) and
	// recycles the row buffers of encoded parts through free. lists holds
	// the lists of the rows kept (the open part's, or the batch's).
	pipelined bool
	rows      []T
	lists     []int64
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
	counter iocount.Writer
	cw      *pq.Writer
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
	codec, _ := pq.CodecFor(reflect.TypeFor[T]())
	t := &TableWriter[T]{w: w, table: table, opts: opts, codec: codec, spares: make(chan *partFile, 1)}
	if w.pipe != nil && codec != nil {
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
	if err := inflight.MkdirAll(TableDir(w.dir, table), 0o755); err != nil {
		return nil, err
	}
	return t, nil
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
	p.counter = iocount.Writer{W: p.buf}
	if t.codec == nil {
		return p, nil
	}
	if p.cw != nil {
		err = p.cw.Reset(&p.counter)
	} else {
		p.cw, err = t.codec.NewWriter(&p.counter, pq.WriterOptions{RowGroupRows: t.opts.RowGroupRows, CreatedBy: createdBy, Metadata: t.kv()})
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
		err = p.cw.Close()
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
	info := PartInfo{File: filepath.ToSlash(rel), Rows: rows, Bytes: p.counter.N, SHA256: hex.EncodeToString(p.h.Sum(nil))}
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

// createdBy is the created_by of the parts the columnar writer writes.
var createdBy = "steplab datasets (schema version " + strconv.Itoa(SchemaVersion) + ")"

// zstdCodec compresses the pages of row types parquet-go's generic writer
// writes (the columnar codec has its own encoder).
var zstdCodec = &zstd.Codec{Level: zstd.SpeedFastest, Concurrency: 1}

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
	} else if len(t.pending)+n > max(cap(t.pending), pq.GatherRows) {
		if t.flushPending() != nil {
			return nil
		}
	}
	l := len(*buf)
	*buf = slices.Grow(*buf, max(n, pq.GatherRows-l))
	return (*buf)[l : l+n : l+n]
}

// lent is the buffer Next lends rows of.
func (t *TableWriter[T]) lent() *[]T {
	if t.pipelined {
		return &t.rows
	}
	return &t.pending
}

// keepLent keeps rows in place when they are the rows Next lent.
func (t *TableWriter[T]) keepLent(rows []T) bool {
	buf := t.lent()
	l := len(*buf)
	if len(rows) == 0 || t.err != nil || l+len(rows) > cap(*buf) || &rows[0] != &(*buf)[:l+1][l] ||
		t.pipelined && t.partRows+int64(len(rows)) > t.opts.PartRows {
		return false
	}
	*buf = (*buf)[:l+len(rows)]
	if t.pipelined {
		t.partRows += int64(len(rows))
	}
	t.own(rows)
	return true
}

// Write appends rows. Parts roll over at opts.PartRows. After an error the
// table writer is unusable: every later call returns the same error.
func (t *TableWriter[T]) Write(rows []T) error {
	if t.keepLent(rows) {
		switch {
		case !t.pipelined && len(t.pending) >= pq.GatherRows:
			return t.flushPending()
		case t.pipelined && t.partRows >= t.opts.PartRows:
			return t.Checkpoint()
		}
		return nil
	}
	if !t.pipelined && len(rows) < pq.GatherRows && t.codec != nil && !t.codec.HasLists() &&
		t.partRows+int64(len(t.pending)+len(rows)) < t.opts.PartRows {
		// A few flat rows (a step recorded by a caller that is not
		// lent rows) are copied into the batch: gathering them alone
		// would cost a pass of every column per call. Rows that
		// complete a part go through at once, as they always did.
		if t.err != nil {
			return t.ready()
		}
		t.pending = append(t.pending, rows...)
		if len(t.pending) >= pq.GatherRows {
			return t.flushPending()
		}
		return nil
	}
	return t.write(rows)
}

// WriteRow is Write of the one row at row: the row Next lent is kept in
// place, any other goes through a one-row buffer (Write keeps no row it is
// given but those Next lent).
func (t *TableWriter[T]) WriteRow(row *T) error {
	buf := t.lent()
	if l := len(*buf); l < cap(*buf) && row == &(*buf)[:l+1][l] {
		return t.Write((*buf)[l : l+1])
	}
	t.one = append(t.one[:0], *row)
	err := t.Write(t.one)
	clear(t.one) // hold no strings or slices of the caller's
	return err
}

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
	if t.codec == nil || t.codec.HasLists() && !t.pipelined {
		if t.codec == nil {
			return t.write([]T{row})
		}
		if t.partRows+1 >= t.opts.PartRows {
			return t.write([]T{row})
		}
		if err := t.ready(); err != nil {
			return err
		}
		if err := pq.WriteRow(t.file.cw, &row); err != nil {
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
		t.pending = make([]T, 0, pq.GatherRows)
	}
	t.pending = append(t.pending, row)
	if t.pipelined {
		t.own(t.pending[len(t.pending)-1:]) // the caller may reuse its lists at once
	}
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
	err := t.write(rows)
	if !t.pipelined {
		t.lists = t.lists[:0] // gathered: the batch's lists are free again
	}
	return err
}

func (t *TableWriter[T]) writeRows(rows []T) error {
	switch {
	case t.pipelined:
		t.rows = append(t.rows, rows...)
		t.own(t.rows[len(t.rows)-len(rows):])
	case t.file.cw != nil:
		return pq.WriteRows(t.file.cw, rows)
	default:
		for i := 0; i < len(rows); i += pq.GatherRows {
			if _, err := t.pw.Write(rows[i:min(i+pq.GatherRows, len(rows))]); err != nil {
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
func (t *TableWriter[T]) Checkpoint() error { return t.checkpoint(false) }

// checkpoint is Checkpoint; empty writes an open part with no rows. A
// pipelined part opened only to lend rows (Next) has none: the sequential
// writer would not have opened it, so it stays open for the rows to come.
func (t *TableWriter[T]) checkpoint(empty bool) error {
	if err := t.flushPending(); err != nil {
		return err
	}
	if t.err != nil {
		return t.err
	}
	if !t.open() || t.pipelined && len(t.rows) == 0 && !empty {
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
	t.rows, t.lists = nil, nil
	t.partCap = max(t.partCap, len(rows))
	return t.w.pipe.submit(func() (heldPart, error) {
		p, err := t.createPart(n, t.spare())
		if err != nil {
			return heldPart{}, err
		}
		if err := pq.WriteRows(p.cw, rows); err != nil {
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

// own makes the kept rows' lists the writer's (the caller may reuse its
// own once Write returns).
func (t *TableWriter[T]) own(rows []T) {
	if t.codec.HasLists() {
		t.lists = pq.OwnLists(t.codec, rows, t.lists)
	}
}

// removeTemp removes a temporary part that will not be renamed.
func removeTemp(name string) {
	os.Remove(name)
	inflight.Done(name)
}

// discard drops the open part (its temporary file, or its rows).
func (t *TableWriter[T]) discard() {
	t.pending = t.pending[:0]
	t.rows, t.lists = nil, nil
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
	if err := t.checkpoint(t.part == 0); err != nil { // an empty table has one empty part
		return err
	}
	t.w.mu.Lock()
	t.w.open[t.table] = false
	delete(t.w.tables, t.table)
	t.w.mu.Unlock()
	t.err = errWriterClosed
	return nil
}
