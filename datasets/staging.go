package datasets

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// Work in progress lives under hidden names that say whose it is:
//
//	.NAME.importing-PID      an import's dataset, renamed to NAME on success
//	.NAME.replacing-PID      a --force run's dataset, swapped with NAME on success
//	.NAME.csv-PID.parquet    a CSV table converted for import table
//	.NAME.tmp-PID-RANDOM     a file written by WriteAtomic (manifest.json, a model)
//	.part-NNNNNN.parquet.tmp a table's open part (inside NAME)
//
// A killed run leaves them behind. Leftovers lists them for validate, and
// RemoveLeftovers, which every run into NAME calls first, deletes those
// whose process is gone.

// StagingPath is the hidden name beside dir where this process writes what
// will become dir.
func StagingPath(dir, what string) string {
	dir = filepath.Clean(dir)
	return filepath.Join(filepath.Dir(dir), fmt.Sprintf(".%s.%s-%d", filepath.Base(dir), what, os.Getpid()))
}

// Leftover is a file or directory an interrupted run left.
type Leftover struct {
	Path string `json:"path"`
	// What it is: "staging directory", "staging file", "temporary file" or
	// "temporary part".
	What string `json:"what"`
	// PID is the process that owned it (0 when the name does not say);
	// Running whether that process still runs (then it is no leftover yet).
	PID     int  `json:"pid,omitempty"`
	Running bool `json:"running,omitempty"`
}

// Leftovers lists the staging directories and temporary files beside dir
// that belong to dir, the temporary files in it, and the temporary parts
// in its tables.
func Leftovers(dir string) ([]Leftover, error) {
	dir = filepath.Clean(dir)
	var out []Leftover
	for _, d := range []struct {
		dir, prefix string
		beside      bool
	}{{filepath.Dir(dir), "." + filepath.Base(dir) + ".", true}, {dir, ".", false}} {
		entries, err := os.ReadDir(d.dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if l, ok := parseLeftover(e, d.prefix, d.beside); ok {
				l.Path = filepath.Join(d.dir, e.Name())
				out = append(out, l)
			}
		}
	}
	temps, err := temporaryParts(dir)
	for _, p := range temps {
		out = append(out, Leftover{Path: p, What: "temporary part"})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, err
}

// Staging names after the ".NAME." or "." prefix: a run's staging
// directory or file (importing-PID, replacing-PID, csv-PID.parquet), and a
// WriteAtomic temporary file (tmp-PID-RANDOM, FILE.tmp-PID-RANDOM).
var (
	stagingName = regexp.MustCompile(`^(?:importing|replacing|csv)-([0-9]+)(?:\.parquet)?$`)
	tempName    = regexp.MustCompile(`(?:^|\.)tmp-([0-9]+)-[^/]*$`)
)

// parseLeftover recognises a staging or temporary name after prefix;
// staging names only beside the dataset.
func parseLeftover(e fs.DirEntry, prefix string, beside bool) (Leftover, bool) {
	rest, ok := strings.CutPrefix(e.Name(), prefix)
	if !ok {
		return Leftover{}, false
	}
	if m := stagingName.FindStringSubmatch(rest); m != nil && beside {
		what := "staging file"
		if e.IsDir() {
			what = "staging directory"
		}
		return owned(what, m[1])
	}
	if m := tempName.FindStringSubmatch(rest); m != nil && !e.IsDir() {
		return owned("temporary file", m[1])
	}
	return Leftover{}, false
}

func owned(what, pid string) (Leftover, bool) {
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return Leftover{What: what}, true
	}
	return Leftover{What: what, PID: n, Running: running(n)}, true
}

// running reports whether process pid exists (signal 0 delivers nothing;
// EPERM means it exists under another user).
func running(pid int) bool {
	if pid == os.Getpid() {
		return true
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}

// temporaryParts lists the open parts (.part-*.parquet.tmp) of dir's tables.
func temporaryParts(dir string) ([]string, error) {
	tables, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil // no dataset there: nothing of its own to list
	}
	var out []string
	for _, t := range tables {
		if !t.IsDir() || !strings.HasSuffix(t.Name(), ".parquet") {
			continue
		}
		_, temps, err := tableFiles(filepath.Join(dir, t.Name()))
		if err != nil {
			return out, err
		}
		out = append(out, temps...)
	}
	return out, nil
}

// RemoveLeftovers deletes the staging directories and temporary files of
// dir whose owning process is gone. Temporary parts stay: they belong to
// the dataset at dir, whose replacement removes them.
func RemoveLeftovers(dir string) error {
	ls, err := Leftovers(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range ls {
		if l.PID == 0 || l.Running {
			continue
		}
		errs = append(errs, os.RemoveAll(l.Path))
	}
	return errors.Join(errs...)
}

// ReplaceDir puts the finished directory tmp at dir and removes what was
// there. Where the system can (Linux), the two are exchanged in one rename,
// so that dir always holds a whole dataset, the old or the new.
func ReplaceDir(tmp, dir string) error {
	if err := exchange(tmp, dir); err == nil {
		return os.RemoveAll(tmp)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}
