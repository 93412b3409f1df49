// Package inflight keeps the list of files and directories this process
// is writing under temporary names (open parts, WriteAtomic's files,
// staging directories), so that a command stopped by a signal removes them
// before it exits: what it leaves is whole files under final names, and no
// temporary ones. Everything renamed into place was complete before the
// rename, so removing a temporary path while another goroutine still
// writes it is safe: that goroutine's rename then fails. Directories and
// files are created through this package (MkdirAll, Create, CreateTemp)
// under the same lock Stop takes, so that nothing it removed is created
// again behind it.
package inflight

import (
	"errors"
	"os"
	"sync"
)

// ErrStopped is returned for a path registered after Stop.
var ErrStopped = errors.New("interrupted: no new files are written")

var state registry

type registry struct {
	sync.Mutex
	paths   map[string]bool
	stopped bool
}

func (r *registry) track(path string) {
	if r.paths == nil {
		r.paths = map[string]bool{}
	}
	r.paths[path] = true
}

// Track registers path (a file or directory being written). After Stop it
// removes path at once and returns ErrStopped.
func Track(path string) error {
	state.Lock()
	defer state.Unlock()
	if state.stopped {
		os.RemoveAll(path)
		return ErrStopped
	}
	state.track(path)
	return nil
}

// Done unregisters path: it was renamed into place or removed.
func Done(path string) {
	state.Lock()
	defer state.Unlock()
	delete(state.paths, path)
}

// CreateTemp is os.CreateTemp with the file tracked until Done.
func CreateTemp(dir, pattern string) (*os.File, error) {
	state.Lock()
	defer state.Unlock()
	if state.stopped {
		return nil, ErrStopped
	}
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	state.track(f.Name())
	return f, nil
}

// Create is os.Create with the file tracked until Done.
func Create(path string) (*os.File, error) {
	state.Lock()
	defer state.Unlock()
	if state.stopped {
		return nil, ErrStopped
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	state.track(path)
	return f, nil
}

// MkdirAll is os.MkdirAll, refused after Stop: a writer still at work
// when the signal came cannot recreate a staging directory Stop removed.
func MkdirAll(path string, perm os.FileMode) error {
	state.Lock()
	defer state.Unlock()
	if state.stopped {
		return ErrStopped
	}
	return os.MkdirAll(path, perm)
}

// Stop removes every tracked path and makes later Track calls fail. It
// returns the paths it removed.
func Stop() []string {
	state.Lock()
	defer state.Unlock()
	state.stopped = true
	var removed []string
	for p := range state.paths {
		if removeAll(p) == nil {
			removed = append(removed, p)
		}
	}
	state.paths = nil
	return removed
}

// removeAll is os.RemoveAll tried again while it fails: a rename another
// goroutine had begun (a part put in place inside a staging directory) can
// add an entry behind it once; nothing new can be created after Stop.
func removeAll(path string) error {
	var err error
	for range 8 {
		if err = os.RemoveAll(path); err == nil {
			return nil
		}
	}
	return err
}
