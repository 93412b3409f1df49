package datasets

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// What a reader takes from a file is held to what the file can hold:
// nothing is read past a regular file's size, and the claims a damaged
// file can make about itself (a manifest's length, a footer's length) are
// refused above these bounds before anything is allocated for them.
const (
	// MaxManifestBytes bounds manifest.json (the largest steplab writes,
	// with thousands of parts, is a few MiB).
	MaxManifestBytes = 64 << 20
	// MaxFooterBytes bounds a Parquet footer (about 150 bytes per column
	// chunk: 400K chunks).
	MaxFooterBytes = 64 << 20
)

// OpenRegular opens path for reading and refuses anything but a regular
// file: a FIFO (whose open would wait for a writer: it is opened without
// blocking), a device such as /dev/zero (endless), a socket or a
// directory. A symlink is followed; Dataset.Parts keeps its targets inside
// the dataset.
func OpenRegular(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: not a regular file (%s): refused", path, fileKind(st.Mode()))
	}
	return f, st, nil
}

func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return m.Type().String()
}

// readCapped reads a regular file of at most limit bytes.
func readCapped(path string, limit int64) ([]byte, error) {
	f, st, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d a reader takes", path, st.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("%s: more than the %d bytes a reader takes", path, limit)
	}
	return b, err
}

// inside reports whether path, its symlinks resolved, lies inside root
// (also resolved).
func inside(root, path string) (bool, error) {
	r, err := filepath.EvalSymlinks(root)
	if err != nil {
		return false, err
	}
	p, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false, err
	}
	rel, err := filepath.Rel(r, p)
	return err == nil && filepath.IsLocal(rel), nil
}

// checkInside refuses a path of the dataset that resolves outside it.
func (d *Dataset) checkInside(path string) error {
	ok, err := inside(d.Dir, path)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s: a symlink out of the dataset %s: refused", path, d.Dir)
	}
	return nil
}

// checkPartPaths refuses a manifest whose part paths leave the dataset:
// absolute paths, "..", and on Windows volume names.
func checkPartPaths(path string, m *Manifest) error {
	for t, ti := range m.Tables {
		for i, p := range ti.Parts {
			if !filepath.IsLocal(filepath.FromSlash(p.File)) {
				return fmt.Errorf("%s: tables.%s.parts[%d].file %q is not a path inside the dataset", path, t, i, p.File)
			}
		}
	}
	return nil
}

// ErrRowCount is wrapped by the error of a part whose rows read differ from
// its footer's count or from the manifest's.
var ErrRowCount = errors.New("row count differs")

// checkPartRows compares the rows read from a part with its footer's
// count and, where the manifest lists the part, the manifest's.
func checkPartRows(path string, read, footer int64, listed int64, isListed bool) error {
	if read != footer {
		return fmt.Errorf("%s: %d rows read, its footer says %d (corrupt or truncated): %w", path, read, footer, ErrRowCount)
	}
	if isListed && read != listed {
		return fmt.Errorf("%s: %d rows, %s records %d (the part changed after it was written): %w", path, read, ManifestFile, listed, ErrRowCount)
	}
	return nil
}

// PartRows checks the rows read from one part of table: against its
// footer's count (footer) and, where the manifest lists the part, the
// manifest's. The error names the part.
func (d *Dataset) PartRows(table, path string, read, footer int64) error {
	listed, ok := d.listedRows(table)[filepath.Clean(path)]
	return checkPartRows(path, read, footer, listed, ok)
}

// listedRows maps the paths of the parts the manifest lists for table to
// their row counts, built once per table.
func (d *Dataset) listedRows(table string) map[string]int64 {
	if d.Manifest == nil {
		return nil
	}
	d.listedMu.Lock()
	defer d.listedMu.Unlock()
	if out, ok := d.listed[table]; ok {
		return out
	}
	out := map[string]int64{}
	for _, p := range d.Manifest.Tables[table].Parts {
		out[filepath.Join(d.Dir, filepath.FromSlash(p.File))] = p.Rows
	}
	if d.listed == nil {
		d.listed = map[string]map[string]int64{}
	}
	d.listed[table] = out
	return out
}

// ListedMissing names the tables and parts the manifest lists that are not
// on disk, one error for all; nil when every listed part is there. A
// reader that went on without them would return fewer rows than were
// written.
func (d *Dataset) ListedMissing(tables ...string) error {
	if d.Manifest == nil {
		return nil
	}
	var missing []string
	for _, t := range tables {
		ti, ok := d.Manifest.Tables[t]
		if !ok {
			continue
		}
		if !d.Has(t) && (ti.Rows > 0 || len(ti.Parts) > 0) {
			missing = append(missing, fmt.Sprintf("table %s (%d rows)", t, ti.Rows))
			continue
		}
		for _, p := range ti.Parts {
			if _, err := os.Lstat(filepath.Join(d.Dir, filepath.FromSlash(p.File))); err != nil {
				missing = append(missing, p.File)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s lists %s, missing on disk", d.Dir, ManifestFile, strings.Join(missing, ", "))
}

// OpenPart opens a part the manifest lists (file: slash-separated, relative
// to the dataset) as a regular file that resolves inside the dataset.
func (d *Dataset) OpenPart(file string) (*os.File, os.FileInfo, error) {
	path := filepath.Join(d.Dir, filepath.FromSlash(file))
	if err := d.checkInside(path); err != nil {
		return nil, nil, err
	}
	return OpenRegular(path)
}
