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
	"sort"
	"strconv"
	"sync"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// Writer creates a dataset directory. Tables are written through
// TableWriters; the manifest is rewritten (atomically) each time a part
// completes, so an interrupted run leaves a readable, partial dataset.
type Writer struct {
	dir string

	mu     sync.Mutex
	m      Manifest
	open   map[string]bool
	closed bool
}

// CreateOptions tune Create.
type CreateOptions struct {
	// Overwrite removes an existing dataset at the path first.
	Overwrite bool
}

// Create starts a dataset at dir with the given manifest (its Tables and
// Status are managed by the writer). dir must not exist or be empty unless
// opts.Overwrite is set.
func Create(dir string, m Manifest, opts CreateOptions) (*Writer, error) {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		if !opts.Overwrite {
			return nil, fmt.Errorf("%s: already exists and is not empty (use --force to overwrite)", dir)
		}
		if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err != nil {
			return nil, fmt.Errorf("%s: refusing to overwrite a directory that is not a steplab dataset", dir)
		}
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	m.SchemaVersion = SchemaVersion
	m.Status = DatasetPartial
	if m.Name == "" {
		m.Name = filepath.Base(filepath.Clean(dir))
	}
	m.Tables = map[string]TableInfo{}
	w := &Writer{dir: dir, m: m, open: map[string]bool{}}
	if err := WriteManifest(dir, &w.m); err != nil {
		return nil, err
	}
	return w, nil
}

// Dir is the dataset directory.
func (w *Writer) Dir() string { return w.dir }

// UpdateManifest lets the caller amend provenance (hardware found during a
// capture, notes) while the dataset is being written.
func (w *Writer) UpdateManifest(f func(m *Manifest)) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(&w.m)
	return WriteManifest(w.dir, &w.m)
}

// Close marks the dataset complete. Every table writer must be closed first.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
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
	w.closed = true
	w.m.Status = DatasetComplete
	return WriteManifest(w.dir, &w.m)
}

// Abort leaves the dataset partial, recording why. Completed parts stay.
func (w *Writer) Abort(reason string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	w.m.Status = DatasetPartial
	if reason != "" {
		w.m.Notes = append(w.m.Notes, "partial: "+reason)
	}
	return WriteManifest(w.dir, &w.m)
}

func (w *Writer) partDone(table string, p PartInfo) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	ti := w.m.Tables[table]
	ti.Parts = append(ti.Parts, p)
	ti.Rows += p.Rows
	w.m.Tables[table] = ti
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

// DefaultTableOptions suit bulk writers (simulate, import).
var DefaultTableOptions = TableOptions{RowGroupRows: 64 * 1024, PartRows: 1 << 20}

// TableWriter streams rows of type T into a table of a dataset, as numbered
// part files. A part is written under a temporary name and renamed when
// complete.
type TableWriter[T any] struct {
	w     *Writer
	table string
	opts  TableOptions

	part     int
	f        *os.File
	buf      *bufio.Writer
	h        hash.Hash
	counter  countingWriter
	pw       *parquet.GenericWriter[T]
	partRows int64
	err      error
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
	w.mu.Lock()
	if _, seen := w.open[table]; seen {
		w.mu.Unlock()
		return nil, fmt.Errorf("dataset %s: table %s opened twice", w.dir, table)
	}
	w.open[table] = true
	w.mu.Unlock()
	if err := os.MkdirAll(TableDir(w.dir, table), 0o755); err != nil {
		return nil, err
	}
	return &TableWriter[T]{w: w, table: table, opts: opts}, nil
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

func (t *TableWriter[T]) partName() string {
	return "part-" + fmt.Sprintf("%06d", t.part) + ".parquet"
}

func (t *TableWriter[T]) openPart() error {
	dir := TableDir(t.w.dir, t.table)
	f, err := os.Create(filepath.Join(dir, "."+t.partName()+".tmp"))
	if err != nil {
		return err
	}
	t.f = f
	t.h = sha256.New()
	t.buf = bufio.NewWriterSize(io.MultiWriter(f, t.h), 1<<20)
	t.counter = countingWriter{w: t.buf}
	t.pw = parquet.NewGenericWriter[T](&t.counter,
		parquet.Compression(&zstd.Codec{Level: zstd.SpeedFastest}),
		parquet.MaxRowsPerRowGroup(int64(t.opts.RowGroupRows)),
		parquet.KeyValueMetadata("steplab.schema_version", strconv.Itoa(SchemaVersion)),
		parquet.KeyValueMetadata("steplab.table", t.table),
	)
	t.partRows = 0
	return nil
}

// Write appends rows. Parts roll over at opts.PartRows.
func (t *TableWriter[T]) Write(rows []T) error {
	if t.err != nil {
		return t.err
	}
	for len(rows) > 0 {
		if t.pw == nil {
			if t.err = t.openPart(); t.err != nil {
				return t.err
			}
		}
		n := int64(len(rows))
		if room := t.opts.PartRows - t.partRows; n > room {
			n = room
		}
		if _, err := t.pw.Write(rows[:n]); err != nil {
			t.err = fmt.Errorf("%s: write: %w", t.table, err)
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

// Checkpoint closes the open part, making every row written so far durable.
// Captures call it periodically; it is a no-op when no rows are pending.
func (t *TableWriter[T]) Checkpoint() error {
	if t.pw == nil {
		return nil
	}
	err := t.pw.Close()
	if err == nil {
		err = t.buf.Flush()
	}
	if err == nil {
		err = t.f.Sync()
	}
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	tmp := t.f.Name()
	t.pw, t.f = nil, nil
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%s: finishing part %d: %w", t.table, t.part, err)
	}
	final := filepath.Join(TableDir(t.w.dir, t.table), t.partName())
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	rel, _ := filepath.Rel(t.w.dir, final)
	info := PartInfo{File: filepath.ToSlash(rel), Rows: t.partRows, Bytes: t.counter.n, SHA256: hex.EncodeToString(t.h.Sum(nil))}
	t.part++
	return t.w.partDone(t.table, info)
}

// Close finishes the table. A table with no rows still gets one (empty)
// part so that readers see its schema.
func (t *TableWriter[T]) Close() error {
	if t.err == errWriterClosed {
		return nil
	}
	if t.err != nil {
		return t.err
	}
	if t.pw == nil && t.part == 0 {
		if err := t.openPart(); err != nil {
			return err
		}
	}
	if err := t.Checkpoint(); err != nil {
		return err
	}
	t.w.mu.Lock()
	t.w.open[t.table] = false
	t.w.mu.Unlock()
	t.err = errWriterClosed
	return nil
}

var errWriterClosed = errors.New("table writer closed")
