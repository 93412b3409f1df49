package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every command that reads a YAML document refuses an alias bomb (nine
// anchors of nine references: 9⁹ nodes in 380 bytes) as bad input, exit 2,
// naming the file, instead of running out of memory.
func TestAliasBombRefused(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("a0: &a0 [x]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&sb, "a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d,", i-1), 9), ","))
	}
	bomb := filepath.Join(t.TempDir(), "bomb.yaml")
	require.NoError(t, os.WriteFile(bomb, []byte(sb.String()), 0o644))
	out := filepath.Join(t.TempDir(), "x")
	cases := [][]string{
		{"sweep", bomb, "--vary", "seed=1", "-o", out},
		{"whatif", bomb, "-o", out},
		{"simulate", "-f", bomb, "-o", out},
		{"check", "--bounds", bomb},
	}
	for _, args := range cases {
		t.Run(args[0], func(t *testing.T) {
			var stdout, stderr strings.Builder
			code := execute(t.Context(), args, &stdout, &stderr)
			assert.Equal(t, 2, code, stderr.String())
			assert.Contains(t, stderr.String(), "alias bomb")
			assert.Contains(t, stderr.String(), "bomb.yaml")
			assert.NoDirExists(t, out)
		})
	}
}
