package datasets

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A file where a dataset or a Parquet file was expected gets the command
// that reads or imports it: import table for a CSV, import FORMAT for a
// JSON export, inspect for a Parquet file.
func TestFileGivenForADatasetSaysWhatToRun(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, file, body string
		open             func(path string) error
		want             []string
	}{
		{"CSV to a dataset reader", "steps.csv", "step_id,kind\n1,decode\n", func(p string) error { _, err := Open(p); return err },
			[]string{"not a dataset directory", "`steplab import table ", "steps.csv -o out/DIR --table steps|requests"}},
		{"CSV to the Parquet reader", "x.CSV", "step_id,kind\n1,decode\n", func(p string) error { _, _, err := OpenParquet(p); return err },
			[]string{"x.CSV: not Parquet", "`steplab import table "}},
		{"JSONL to a dataset reader", "profile_export.jsonl", "{}\n", func(p string) error { _, err := Open(p); return err },
			[]string{"`steplab import FORMAT`", "`steplab import --help` lists the formats"}},
		{"Parquet file to a dataset reader", "steps.parquet", "PAR1", func(p string) error { _, err := Open(p); return err },
			[]string{"`steplab inspect ", "`steplab import table "}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.file)
			require.NoError(t, os.WriteFile(p, []byte(tc.body), 0o644))
			err := tc.open(p)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// A table directory given where its dataset is wanted names the dataset.
func TestOpenTableDirNamesDataset(t *testing.T) {
	dir := filepath.Join("h200", "traffic-azure-5rps")
	_, err := Open(TableDir(dir, TableSteps))
	require.ErrorContains(t, err, "a table of the dataset "+dir+": give the dataset's directory, "+dir)
	_, err = Open(t.TempDir())
	require.ErrorContains(t, err, "not a dataset: no manifest.json")
}
