package jobs

import (
	"bytes"
	"log/slog"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logged runs f with the default logger writing into a buffer.
func logged(t *testing.T, f func()) string {
	t.Helper()
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(old)
	f()
	return buf.String()
}

func TestResolve(t *testing.T) {
	cores := runtime.NumCPU()
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)
	cases := []struct {
		name      string
		procs     int // GOMAXPROCS before
		requested int
		want      int
		warning   string
	}{
		{"every core by default", cores, 0, cores, ""},
		{"GOMAXPROCS by default", 1, 0, 1, ""},
		{"one", cores, 1, 1, ""},
		{"the cores", cores, cores, cores, ""},
		{"beyond the cores", cores, cores + 7, cores, "is more than the"},
		{"GOMAXPROCS beyond the cores", cores + 3, 0, cores, "GOMAXPROCS="},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			runtime.GOMAXPROCS(c.procs)
			var got int
			out := logged(t, func() {
				var err error
				got, err = Resolve(c.requested)
				require.NoError(t, err)
			})
			assert.Equal(t, c.want, got)
			assert.LessOrEqual(t, runtime.GOMAXPROCS(0), cores, "GOMAXPROCS within the cores")
			if c.warning == "" {
				assert.Empty(t, out)
			} else {
				assert.Contains(t, out, c.warning)
				assert.Contains(t, out, "level=WARN")
			}
		})
	}
}

func TestResolveRefusesNegative(t *testing.T) {
	_, err := Resolve(-2)
	require.EqualError(t, err, "--jobs -2: must be 0 (every core) or more")
}
