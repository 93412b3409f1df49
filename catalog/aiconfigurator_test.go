package catalog

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAIConfiguratorConfigs loads every config.json of AIConfigurator's
// model_configs (testdata/aiconfigurator, ATTRIBUTION.md) and sizes it on
// each GPU at the first TP in 1, 2, 4, 8 whose weights and KV cache fit;
// the ones that fit nowhere have more weights than 8 of those GPUs hold.
// minFits is the count measured when the table was last changed.
func TestAIConfiguratorConfigs(t *testing.T) {
	files, err := filepath.Glob("testdata/aiconfigurator/*_config.json")
	require.NoError(t, err)
	var configs []string
	for _, f := range files {
		if !strings.HasSuffix(f, "_hf_quant_config.json") {
			configs = append(configs, f)
		}
	}
	require.Len(t, configs, 86)
	for _, tc := range []struct {
		gpu     string
		minFits int
	}{{"B200", 81}, {"B300", 86}} {
		t.Run(tc.gpu, func(t *testing.T) {
			hw, err := LookupHardware(tc.gpu)
			require.NoError(t, err)
			fits := 0
			for _, f := range configs {
				s, err := LoadModelConfig(f)
				if !assert.NoError(t, err, f) {
					continue
				}
				tp := firstFittingTP(hw, s)
				if tp > 0 {
					fits++
				} else {
					assert.Greater(t, float64(s.WeightBytes()), 8*hw.MemBytes()*0.9, "%s fits nowhere but is not too large", f)
				}
				t.Logf("%-52s %7.1fB %6.1fB %7.1f GB attn %s mlp %s experts %s kv %s TP%d", strings.TrimSuffix(filepath.Base(f), "_config.json"),
					float64(s.ParamCount())/1e9, float64(s.ActiveParamCount())/1e9, float64(s.WeightBytes())/1e9,
					s.MixerDType(), s.LinearDType(), s.ExpertDType(), s.KVCacheDType(), tp)
			}
			t.Logf("%d of %d fit on %s", fits, len(configs), tc.gpu)
			assert.GreaterOrEqual(t, fits, tc.minFits)
		})
	}
}

// firstFittingTP is the smallest TP in 1, 2, 4, 8 at which s's weights and
// a KV cache fit on hw, or 0.
func firstFittingTP(hw Hardware, s Shape) int {
	for _, tp := range []int{1, 2, 4, 8} {
		if sh := s.WithTP(tp); sh.Validate() == nil {
			if _, err := KVBlocks(hw, sh, 16, 0.9, 0); err == nil {
				return tp
			}
		}
	}
	return 0
}

// TestArchitecturesDocumented: every supported architecture says what
// it prices, and docs/catalog.md's table says the same.
func TestArchitecturesDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "catalog.md"))
	require.NoError(t, err)
	for _, a := range Architectures() {
		assert.NotEmpty(t, a.Layers, a.Architecture)
		row := fmt.Sprintf("| `%s` | %s | %s |", a.Architecture, a.Layers, cmp.Or(a.Approximations, "—"))
		assert.Contains(t, string(doc), row, "docs/catalog.md#architectures")
	}
	assert.Len(t, archDocs, len(hfArchitectures), "no description of an unsupported architecture")
}
