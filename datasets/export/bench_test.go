package export

import (
	"path/filepath"
	"testing"
)

// BenchmarkExportBundled exports the bundled 6K-step H200 traffic dataset,
// every table, to each format:
//
//	go test -run XX -bench ExportBundled -count 5 ./datasets/export/
func BenchmarkExportBundled(b *testing.B) {
	src := filepath.Join("..", "h200", "traffic-azure-5rps")
	for _, format := range []string{CSV, Arrow} {
		b.Run(format, func(b *testing.B) {
			out := b.TempDir()
			for b.Loop() {
				if _, err := Dataset(src, out, Options{Format: format}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
