package pricing_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/catalog"
	"github.com/steplab/steplab/pricing"
)

// TestDataDriven runs testdata/specs: FPM and host specs for a GPU and a
// model, and the models pricing makes of them. One command:
//
//	price hardware=GPU model=NAME [tp=N] [fpm=SPEC] [host=PATH] [version=V]
//	        the output is the FPM's name and form, the host model's note,
//	        and every note pricing made, or the refusal, one line
//
// Paths in specs are relative to the repository root.
func TestDataDriven(t *testing.T) {
	datadriven.RunTest(t, filepath.Join("testdata", "specs"), func(t *testing.T, td *datadriven.TestData) string {
		require.Equal(t, "price", td.Cmd)
		arg := func(k string) string {
			for _, a := range td.CmdArgs {
				if a.Key == k {
					return a.Vals[0]
				}
			}
			return ""
		}
		hw, err := catalog.LookupHardware(arg("hardware"))
		require.NoError(t, err)
		s, err := catalog.LookupModel(arg("model"))
		require.NoError(t, err)
		if tp := arg("tp"); tp != "" {
			var n int
			_, err := fmt.Sscan(tp, &n)
			require.NoError(t, err)
			s = s.WithTP(n)
		}
		root := func(p string) string {
			if p == "" || pricing.IsPrior(p) {
				return p
			}
			return filepath.Join("..", p)
		}
		p, err := pricing.Price(pricing.Spec{Hardware: hw, Shape: s, FPM: root(arg("fpm")), Host: root(arg("host")), EngineVersion: arg("version")})
		if err != nil {
			return "error: " + strings.ReplaceAll(err.Error(), "../", "") + "\n"
		}
		var b strings.Builder
		fmt.Fprintf(&b, "fpm %s (%T)\n", strings.ReplaceAll(pricing.Name(p), "../", ""), p.FPM)
		fmt.Fprintf(&b, "%s\n", strings.ReplaceAll(pricing.HostNote(p), "../", ""))
		for _, n := range p.Notes {
			fmt.Fprintf(&b, "note: %s\n", strings.ReplaceAll(n, "../", ""))
		}
		return b.String()
	})
}
