package dist

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// StoreFile names a results directory's store id: the submitter and the
// workers of one directory (local or shared) read the same id, and the
// tasks of its sweeps go to that store's subjects and consumer.
const StoreFile = ".steplab-store"

var storeRE = regexp.MustCompile(`^[0-9a-f]{16}$`)

// StoreID returns the store id of results directory dir, creating it (16
// random hex digits, linked into place so that concurrent creators agree)
// when the directory has none.
func StoreID(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, StoreFile)
	for range 2 {
		b, err := os.ReadFile(path)
		if err == nil {
			id := strings.TrimSpace(string(b))
			if !storeRE.MatchString(id) {
				return "", fmt.Errorf("%s: not a store id (want 16 hex digits); remove it to make a new one", path)
			}
			return id, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if err := createStore(dir, path); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("%s: cannot create the store id", path)
}

func createStore(dir, path string) error {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	f, err := os.CreateTemp(dir, "."+StoreFile+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(hex.EncodeToString(b) + "\n"); err != nil || f.Chmod(0o644) != nil {
		f.Close()
		return fmt.Errorf("%s: cannot write the store id", path)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Link(f.Name(), path)
}
