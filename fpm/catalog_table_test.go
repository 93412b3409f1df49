package fpm

import (
	"bytes"
	"fmt"
	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/internal/rewrite"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rooflineBound is the time a step cannot beat on hw: every byte it reads
// (streamed weights, KV) at the full memory bandwidth, or every FLOP
// (GEMMs, attention) at the full peak, whichever is longer.
func rooflineBound(hw catalog.Hardware, s catalog.Shape, f Features) (ms float64, by string) {
	decodeRows := math.Max(f.DecodeRequests, f.PaddedBatch)
	tokens := f.PrefillTokens + decodeRows
	bytes := s.StreamedWeightBytesAt(tokens) + (f.DecodeKVTokens+f.PrefillKVTokens)*float64(s.KVBytesPerToken())
	flops := 2*(s.GEMMParamsPerGPU()*tokens+s.LMHeadParamsPerGPU()*(f.PrefillRequests+decodeRows)) +
		s.AttnFLOPsPerPair()*(f.PrefillAttn+f.DecodeKVTokens)
	mem := bytes / hw.BandwidthBytes() * 1e3
	compute := flops / (hw.PeakTFLOPSFor(s.GEMMDType(hw)) * 1e12) * 1e3
	if mem >= compute {
		return mem, "HBM"
	}
	return compute, "compute"
}

// TestCatalogDecodeTable prices Llama-3.1-8B decode steps on every
// catalogue GPU beside the bound each cannot beat; the table is a golden
// file and docs/catalog.md shows it (go test ./fpm -run
// CatalogDecodeTable -rewrite rewrites both).
func TestCatalogDecodeTable(t *testing.T) {
	const ctx = 1024
	var b bytes.Buffer
	fmt.Fprintf(&b, "| GPU | B=1 step (ms) | B=1 bound (ms) | B=256 step (ms) | B=256 bound (ms) | KV tokens at 0.9 |\n")
	fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|\n")
	for _, hw := range builtin.Hardware() {
		r := NewRoofline(hw, llama8B)
		require.NoError(t, r.Validate(), hw.Name)
		row := []string{hw.Name}
		for _, batch := range []float64{1, 256} {
			f := decodeStep(batch, ctx)
			pred := r.PredictNs(f) / 1e6
			bound, by := rooflineBound(hw, llama8B, f)
			assert.Less(t, bound, pred, "%s B=%v: the prior beats its own bound", hw.Name, batch)
			assert.Greater(t, pred, 0.0)
			row = append(row, fmt.Sprintf("%.2f", pred), fmt.Sprintf("%.2f %s", bound, by))
		}
		kv := "does not fit"
		if n, err := catalog.KVBlocks(hw, llama8B, 16, 0.9, 0); err == nil {
			kv = fmt.Sprintf("%d", n*16)
			if n*16 < 256*ctx {
				kv += " (< B=256×1024)"
			}
		}
		row = append(row, kv)
		fmt.Fprintf(&b, "| %s |\n", strings.Join(row, " | "))
	}
	// The anchor: B=1 on an H200 is ~15 GB of weights at 80% of 4.8 TB/s
	// plus overheads, 4-5 ms; B=256 at 1K context adds 34 GB of KV.
	h := NewRoofline(h200, llama8B)
	assert.InDelta(t, 4.5, h.PredictNs(decodeStep(1, ctx))/1e6, 0.5)
	assert.InDelta(t, 14, h.PredictNs(decodeStep(256, ctx))/1e6, 3)

	rewrite.DocTable(t, filepath.Join("testdata", "catalog", "llama-3.1-8b-decode.md"), filepath.Join("..", "docs", "catalog.md"),
		"catalog-decode-table", "go test ./fpm -run CatalogDecodeTable -rewrite", b.String())
}
