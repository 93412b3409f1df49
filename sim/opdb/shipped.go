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

// ForHardware returns the shipped database measured on a GPU under a
// framework, at the version nearest version (the newest for ""). A
// database's GPU is its system file's, resolved through the catalogue.
func ForHardware(hw model.Hardware, framework, version string) (*model.OpDB, error) {
	var best *model.OpDB
	for _, n := range Names() {
		db, err := openShipped(n)
		if err != nil {
			return nil, err
		}
		if gpu, err := DatabaseGPU(db); err != nil || gpu != hw.Name || db.Framework != framework {
			continue
		}
		switch {
		case best == nil:
			best = db
		case version == "" && compareVersions(db.Version, best.Version) > 0:
			best = db
		case version != "" && versionDistance(db.Version, version) < versionDistance(best.Version, version):
			best = db
		}
	}
	if best == nil {
		return nil, fmt.Errorf("opdb: no %s database shipped with steplab was measured on %s (shipped: %s); point at one with ops:DIR or an AIConfigurator tree with ops:aic:PATH, or price it with the roofline",
			framework, hw.Name, strings.Join(Names(), ", "))
	}
	return best, nil
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
