package datasets

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadPID is the PID of a process that has exited.
func deadPID(t *testing.T) int {
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	return cmd.Process.Pid
}

// A --force writer writes beside the old dataset: until Close the old one
// is whole at the path; Abort keeps it; Close replaces it.
func TestOverwriteReplacesOnlyOnClose(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	old := simSteps(50, 1)
	writeTable(t, dir, TableSteps, old, TableOptions{}, false)
	oldSHA, err := DirSHA256(dir)
	require.NoError(t, err)

	w, err := Create(dir, Manifest{}, CreateOptions{Overwrite: true})
	require.NoError(t, err)
	assert.Equal(t, StagingPath(dir, "replacing"), w.Dir())
	tw, err := NewTableWriter[Step](w, TableSteps, TableOptions{PartRows: 10})
	require.NoError(t, err)
	require.NoError(t, tw.Write(simSteps(25, 2)))
	require.NoError(t, w.Abort("interrupted"))
	sha, err := DirSHA256(dir)
	require.NoError(t, err)
	assert.Equal(t, oldSHA, sha, "an aborted --force run leaves the old dataset")
	m, err := ReadManifest(w.Dir())
	require.NoError(t, err)
	assert.Equal(t, DatasetPartial, m.Status, "the aborted run's parts stay at its staging name")

	newRows := simSteps(30, 3)
	w, err = Create(dir, Manifest{}, CreateOptions{Overwrite: true})
	require.NoError(t, err)
	tw, err = NewTableWriter[Step](w, TableSteps, TableOptions{})
	require.NoError(t, err)
	require.NoError(t, tw.Write(newRows))
	require.NoError(t, tw.Close())
	require.NoError(t, w.Close())
	assert.Equal(t, dir, w.Dir())
	assert.Equal(t, newRows, readTable[Step](t, dir, TableSteps))
	assert.NoDirExists(t, StagingPath(dir, "replacing"))
}

// Hold keeps completed parts invisible to readers until Commit.
func TestHoldCommit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	w, err := Create(dir, Manifest{}, CreateOptions{})
	require.NoError(t, err)
	w.Hold()
	tw, err := NewTableWriter[Step](w, TableSteps, TableOptions{PartRows: 10})
	require.NoError(t, err)
	rows := simSteps(35, 1)
	require.NoError(t, tw.Write(rows))
	d, err := Open(dir)
	require.NoError(t, err)
	parts, err := d.Parts(TableSteps)
	require.NoError(t, err)
	assert.Empty(t, parts, "three parts completed but not committed")
	assert.Empty(t, d.Manifest.Tables[TableSteps].Parts)

	require.NoError(t, w.Commit())
	assert.Equal(t, rows[:30], readTable[Step](t, dir, TableSteps))
	require.NoError(t, tw.Close())
	require.NoError(t, w.Close())
	assert.Equal(t, rows, readTable[Step](t, dir, TableSteps), "Close commits the rest")
}

// Leftovers names what killed runs left at and beside a dataset;
// RemoveLeftovers deletes those whose process is gone and nothing else.
func TestLeftovers(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "ds")
	writeTable(t, dir, TableSteps, simSteps(5, 1), TableOptions{}, false)
	dead, live := deadPID(t), os.Getpid()
	mk := func(rel string, isDir bool) string {
		p := filepath.Join(root, rel)
		if isDir {
			require.NoError(t, os.MkdirAll(filepath.Join(p, "steps.parquet"), 0o755))
		} else {
			require.NoError(t, os.WriteFile(p, []byte("x"), 0o644))
		}
		return p
	}
	deadImport := mk(fmt.Sprintf(".ds.importing-%d", dead), true)
	liveReplace := mk(fmt.Sprintf(".ds.replacing-%d", live), true)
	deadCSV := mk(fmt.Sprintf(".ds.csv-%d.parquet", dead), false)
	deadManifest := mk(fmt.Sprintf("ds/.manifest.json.tmp-%d-123", dead), false)
	openPart := mk("ds/steps.parquet/.part-000001.parquet.tmp", false)
	others := []string{mk(fmt.Sprintf(".other.importing-%d", dead), true), mk(".ds.notes", false), mk("ds/.hidden", false)}

	ls, err := Leftovers(dir)
	require.NoError(t, err)
	got := map[string]Leftover{}
	for _, l := range ls {
		got[l.Path] = l
	}
	want := map[string]Leftover{
		deadImport:   {Path: deadImport, What: "staging directory", PID: dead},
		liveReplace:  {Path: liveReplace, What: "staging directory", PID: live, Running: true},
		deadCSV:      {Path: deadCSV, What: "staging file", PID: dead},
		deadManifest: {Path: deadManifest, What: "temporary file", PID: dead},
		openPart:     {Path: openPart, What: "temporary part"},
	}
	assert.Equal(t, want, got)

	require.NoError(t, RemoveLeftovers(dir))
	for _, p := range []string{deadImport, deadCSV, deadManifest} {
		assert.NoFileExists(t, p)
		assert.NoDirExists(t, p)
	}
	for _, p := range append([]string{liveReplace, openPart}, others...) {
		_, err := os.Stat(p)
		assert.NoError(t, err, "%s stays", p)
	}
}
