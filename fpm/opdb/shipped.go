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

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/fpm"
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
	cache   = map[string]*fpm.OpDB{}
)

// Open returns a database by the name of one shipped inside the binary
// (Names), else reads the directory nameOrDir. A shipped database is read
// once per process; callers must not modify it.
func Open(nameOrDir string) (*fpm.OpDB, error) {
	if isShipped(nameOrDir) {
		return openShipped(nameOrDir)
	}
	if _, err := os.Stat(nameOrDir); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("opdb: %q is neither a database shipped with steplab (%s) nor a directory", nameOrDir, strings.Join(Names(), ", "))
	}
	return LoadDir(nameOrDir)
}

func openShipped(name string) (*fpm.OpDB, error) {
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if db, ok := cache[name]; ok {
		return db, nil
	}
	db, err := LoadFS(shippedFS(name), name)
	if err != nil {
		return nil, fmt.Errorf("opdb: shipped database %s: %w", name, err)
	}
	db.Source = name
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
func ForHardware(hw catalog.Hardware, framework, version string) (*fpm.OpDB, error) {
	byVersion, versions, err := shippedFor(hw, framework)
	if err != nil {
		return nil, err
	}
	if len(versions) == 0 {
		return nil, fmt.Errorf("opdb: no %s database shipped with steplab was measured on %s (shipped: %s); point at one with ops:DIR or an AIConfigurator tree with ops:aic:PATH, or price it with the roofline",
			framework, hw.Name, strings.Join(Names(), ", "))
	}
	return openShipped(byVersion[nearest(versions, version)])
}

// Ships reports whether a database measured on the GPU under the
// framework is shipped with steplab.
func Ships(hw catalog.Hardware, framework string) (bool, error) {
	_, versions, err := shippedFor(hw, framework)
	return len(versions) > 0, err
}

// shippedFor lists the shipped databases of a GPU and framework by
// version. Only the system and meta files are read to choose: a
// database's tables are read once it is the one.
func shippedFor(hw catalog.Hardware, framework string) (map[string]string, []string, error) {
	byVersion := map[string]string{}
	var versions []string
	for _, n := range Names() {
		fsys := shippedFS(n)
		sys, err := readSystem(fsys)
		if err != nil {
			return nil, nil, fmt.Errorf("opdb: shipped database %s: %w", n, err)
		}
		fw, v, _, err := readMeta(fsys, path.Dir(GEMMFile))
		if err != nil {
			return nil, nil, fmt.Errorf("opdb: shipped database %s: %w", n, err)
		}
		if gpu, err := catalog.LookupHardware(sys.GPU); err != nil || gpu.Name != hw.Name || fw != framework {
			continue
		}
		if _, dup := byVersion[v]; !dup {
			byVersion[v] = n
			versions = append(versions, v)
		}
	}
	return byVersion, versions, nil
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
