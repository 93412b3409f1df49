package opdb

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/steplab/steplab/model"
)

// The databases shipped inside the binary: one folder each under data/.
//
//go:embed data
var shipped embed.FS

// Names lists the databases shipped inside the binary, sorted.
func Names() []string {
	entries, _ := fs.ReadDir(shipped, "data")
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

var (
	cacheMu sync.Mutex
	cache   = map[string]*model.OpDB{}
)

// Open returns a database by the name of one shipped inside the binary
// (Names), else reads the directory nameOrDir. A shipped database is read
// once per process; callers must not modify it.
func Open(nameOrDir string) (*model.OpDB, error) {
	if isShipped(nameOrDir) {
		return openShipped(nameOrDir)
	}
	if _, err := os.Stat(nameOrDir); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("opdb: %q is neither a database shipped with steplab (%s) nor a directory", nameOrDir, strings.Join(Names(), ", "))
	}
	return LoadDir(nameOrDir)
}

func openShipped(name string) (*model.OpDB, error) {
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if db, ok := cache[name]; ok {
		return db, nil
	}
	db, err := LoadFS(shippedFS(name), name)
	if err != nil {
		return nil, fmt.Errorf("opdb: shipped database %s: %w", name, err)
	}
	cache[name] = db
	return db, nil
}

// shippedFS is the folder of a shipped database.
func shippedFS(name string) fs.FS {
	sub, _ := fs.Sub(shipped, path.Join("data", name))
	return sub
}

// ForHardware returns the shipped database measured on a GPU, matching the
// database's system name (AIConfigurator's "h200_sxm") to the hardware's
// ("H200-SXM") whatever the case and punctuation.
func ForHardware(hw model.Hardware) (*model.OpDB, error) {
	want := squash(hw.Name)
	for _, n := range Names() {
		if s, err := readSystem(shippedFS(n)); err == nil && squash(s.GPU) == want {
			return openShipped(n)
		}
	}
	return nil, fmt.Errorf("opdb: no database shipped with steplab was measured on %s (shipped: %s); point at one with ops:DIR",
		hw.Name, strings.Join(Names(), ", "))
}

func squash(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return -1
	}, s)
}

// isShipped reports whether name is a database shipped inside the binary.
func isShipped(name string) bool {
	for _, n := range Names() {
		if n == name {
			return true
		}
	}
	return false
}
