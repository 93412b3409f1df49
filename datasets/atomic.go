package datasets

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/steplab/steplab/internal/inflight"
)

// WriteAtomic creates path from what write writes. The bytes go to a
// temporary file in the same directory, which is synced and renamed over
// path only when write succeeded: a reader sees the old file or the whole
// new one, and a failure leaves nothing behind. The file is readable by
// everyone (0644), like the parts of a dataset; the temporary file alone
// would be 0600. Missing parent directories are created, as a dataset's
// directory is, so that `-o out/x.json` works in a fresh clone.
func WriteAtomic(path string, write func(io.Writer) error) error {
	if err := inflight.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	// The temporary name carries the PID, so that the next run into path
	// can tell a killed run's file from a running one's (Leftovers).
	f, err := inflight.CreateTemp(filepath.Dir(path), fmt.Sprintf(".%s.tmp-%d-*", filepath.Base(path), os.Getpid()))
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = write(f)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	inflight.Done(tmp)
	return err
}

// WriteFileAtomic writes data to path through WriteAtomic.
func WriteFileAtomic(path string, data []byte) error {
	return WriteAtomic(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}
