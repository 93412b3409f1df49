// Package inflight keeps the list of files and directories this process
// is writing under temporary names (open parts, WriteAtomic's files,
// staging directories), so that a command stopped by a signal removes them
// before it exits: what it leaves is whole files under final names, and no
// temporary ones. Everything renamed into place was complete before the
// rename, so removing a temporary path while another goroutine still
// writes it is safe: that goroutine's rename then fails.
package inflight

import (
	"errors"
	"os"
	"sync"
)

// ErrStopped is returned for a path registered after Stop.
var ErrStopped = errors.New("interrupted: no new files are written")

var state struct {
	sync.Mutex
	paths   map[string]bool
	stopped bool
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
	if state.paths == nil {
		state.paths = map[string]bool{}
	}
	state.paths[path] = true
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
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	if err := Track(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Create is os.Create with the file tracked until Done.
func Create(path string) (*os.File, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := Track(path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Stop removes every tracked path and makes later Track calls fail. It
// returns the paths it removed.
func Stop() []string {
	state.Lock()
	defer state.Unlock()
	state.stopped = true
	var removed []string
	for p := range state.paths {
		if os.RemoveAll(p) == nil {
			removed = append(removed, p)
		}
	}
	state.paths = nil
	return removed
}
