package embedded

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNames(t *testing.T) {
	require.Equal(t, []string{"azure-conv-2023", "llmservingsim-llama-3.1-8b", "llmservingsim-qwen3-30b-a3b", "mooncake-conv-fast25"}, Names())
}

func TestOpenCountsLines(t *testing.T) {
	tests := []struct {
		name, firstLine string
		lines           int
	}{
		{"azure-conv-2023", "TIMESTAMP,ContextTokens,GeneratedTokens", 19366 + 1},
		{"embedded:llmservingsim-llama-3.1-8b", `{"request_id": "bench-0", "input_toks": 2358,`, 300},
		{"embedded:llmservingsim-qwen3-30b-a3b", `{"request_id": "bench-0", "input_toks": 2361,`, 300},
		{"mooncake-conv-fast25", `{"timestamp": 0, "input_length": 6758,`, 3000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc, err := Open(tt.name)
			require.NoError(t, err)
			defer rc.Close()
			sc := bufio.NewScanner(rc)
			n := 0
			for sc.Scan() {
				if n == 0 {
					require.True(t, strings.HasPrefix(sc.Text(), tt.firstLine), sc.Text())
				}
				n++
			}
			require.NoError(t, sc.Err())
			require.Equal(t, tt.lines, n)
		})
	}
}

func TestEveryDatasetHasLicenceAndAttribution(t *testing.T) {
	for _, n := range Names() {
		fs, err := Files(n)
		require.NoError(t, err)
		require.Contains(t, fs, "LICENSE", n)
		require.Contains(t, fs, "ATTRIBUTION.md", n)
		rc, err := OpenFile(n, "ATTRIBUTION.md")
		require.NoError(t, err)
		b, err := io.ReadAll(rc)
		require.NoError(t, err)
		d, _ := Lookup(n)
		require.Contains(t, string(b), d.License, "attribution of %s names its licence", n)
	}
}

func TestOpenErrors(t *testing.T) {
	_, err := Open("nope")
	require.ErrorContains(t, err, `no embedded dataset "nope" (have: azure-conv-2023, llmservingsim-llama-3.1-8b, llmservingsim-qwen3-30b-a3b, mooncake-conv-fast25)`)
	_, err = OpenFile("azure-conv-2023", "meta.json")
	require.True(t, errors.Is(err, fs.ErrNotExist))
	_, err = OpenFile("azure-conv-2023", "../llmservingsim-llama-3.1-8b/meta.json")
	require.ErrorContains(t, err, "invalid file name")
}
