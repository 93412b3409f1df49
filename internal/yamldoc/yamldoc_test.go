package yamldoc

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bomb is n anchors of n references each: about n^n nodes, 380 bytes
// for n = 9.
func bomb(n int) string {
	var sb strings.Builder
	sb.WriteString("a0: &a0 [x]\n")
	for i := 1; i < n; i++ {
		refs := strings.Repeat(fmt.Sprintf("*a%d,", i-1), n)
		fmt.Fprintf(&sb, "a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(refs, ","))
	}
	return sb.String()
}

// deep nests n sequences through aliases: each anchor holds the previous
// one, so the document is shallow but its expansion is n levels deep.
func deep(n int) string {
	var sb strings.Builder
	sb.WriteString("a0: &a0 [x]\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&sb, "a%d: &a%d [*a%d]\n", i, i, i-1)
	}
	return sb.String()
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name, doc, want string // want: "" accepted, else a substring of the error
	}{
		{"plain mapping", "a: 1\nb: [1, 2, {c: d}]\n", ""},
		{"empty", "", ""},
		{"aliases within budget", bomb(4), ""},
		{"two documents", "a: 1\n---\nb: 2\n", ""},
		{"alias bomb", bomb(9), "expand to more than 100000 nodes"},
		{"wide bomb across documents", strings.Repeat(bomb(6)+"---\n", 5), "expand to more than 100000 nodes"},
		{"deep through aliases", deep(MaxDepth + 5), "expand to more than 100 levels"},
		{"not YAML", "a: [1, 2\n", "did not find expected"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Check([]byte(c.doc))
			if c.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// The bomb of nine anchors × nine references is refused with
// little memory: Check counts the expansion without doing it.
func TestBombRefusedInBoundedMemory(t *testing.T) {
	doc := []byte(bomb(9))
	require.Less(t, len(doc), 400)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Parse(doc)
	runtime.ReadMemStats(&after)
	require.ErrorContains(t, err, "alias bomb")
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("refused a %d-byte bomb after allocating %d bytes", len(doc), allocated)
	assert.Less(t, allocated, uint64(1<<20), "bytes allocated refusing the bomb")
}

// Unmarshal decodes what Check accepts, aliases included, and refuses the
// bomb before decoding.
func TestUnmarshal(t *testing.T) {
	var v struct {
		A []int `yaml:"a"`
		B []int `yaml:"b"`
	}
	require.NoError(t, Unmarshal([]byte("a: &x [1, 2]\nb: *x\n"), &v))
	assert.Equal(t, []int{1, 2}, v.B)
	var any map[string]any
	require.ErrorContains(t, Unmarshal([]byte(bomb(9)), &any), "alias bomb")
	assert.Nil(t, any)
}

// The largest YAML file the repository ships is well within the budget.
func TestShippedFilesFit(t *testing.T) {
	b, err := os.ReadFile("../../checks.yaml")
	require.NoError(t, err)
	require.NoError(t, Check(b))
}

// FuzzCheck: no input panics or hangs Check, and what it accepts decodes
// into a generic value.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"a: 1\n", bomb(3), bomb(9), deep(120), "a: &a [*a]\n", "- &x {k: *x}\n", "---\n---\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if Check(b) != nil {
			return
		}
		var v any
		_ = Unmarshal(b, &v)
	})
}
