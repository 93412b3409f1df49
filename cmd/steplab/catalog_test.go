package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCatalogCLI(t *testing.T) {
	t.Setenv("STEPLAB_CATALOG", "")
	out, err := runCLI(t, "catalog", "hardware")
	require.NoError(t, err)
	assert.Contains(t, out, "H200-SXM")
	assert.Contains(t, out, "nvlink 450 GB/s")
	assert.Regexp(t, `A100-SXM-80GB\s+80 GB\s+2039 GB/s\s+312\s+-`, out, "no fp8 on an A100")

	out, err = runCLI(t, "catalog", "models", "--json")
	require.NoError(t, err)
	var models []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &models))
	byName := map[string]map[string]any{}
	for _, m := range models {
		byName[m["name"].(string)] = m
	}
	require.Contains(t, byName, "Qwen3-30B-A3B")
	q := byName["Qwen3-30B-A3B"]
	assert.InDelta(t, 30.5e9, q["params"], 0.1e9)
	assert.InDelta(t, 3.35e9, q["active_params"], 0.05e9)
	assert.EqualValues(t, 128, q["moe"].(map[string]any)["experts"])

	out, err = runCLI(t, "catalog", "show", "NVIDIA H200")
	require.NoError(t, err)
	assert.Contains(t, out, "hardware      H200-SXM")
	assert.Contains(t, out, "hand-set against")

	_, err = runCLI(t, "catalog", "show", "not-a-thing")
	assert.Equal(t, 2, exitCode(err))
	assert.ErrorContains(t, err, "nearest known")
}

// TestCatalogCLIUserDirectory: a GPU added as one file in a
// STEPLAB_CATALOG directory is listed and shown, and shadowing a built-in
// name prints a note.
func TestCatalogCLIUserDirectory(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "hardware"), 0o755))
	spec := `name: Lab-GPU
aliases: ["NVIDIA Lab GPU"]
memory_gb: 64
memory_bandwidth_gbs: 2000
tflops: {fp32: 60, bf16: 400, fp16: 400}
sms: 120
boost_clock_mhz: 1800
interconnects: [{kind: pcie, gbs_per_direction: 32, latency_us: 15, gpus: 8}]
roofline: generic
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hardware", "lab.yaml"), []byte(spec), 0o644))
	shadow := strings.Replace(spec, "name: Lab-GPU", "name: L4", 1)
	shadow = strings.Replace(shadow, `aliases: ["NVIDIA Lab GPU"]`, "aliases: []", 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hardware", "l4.yaml"), []byte(shadow), 0o644))
	t.Setenv("STEPLAB_CATALOG", dir)

	out, err := runCLI(t, "catalog", "hardware")
	require.NoError(t, err)
	assert.Contains(t, out, "Lab-GPU")
	assert.Contains(t, out, "note: hardware L4 ("+filepath.Join(dir, "hardware", "l4.yaml")+") shadows L4 (builtin:hardware/l4.yaml)")
	out, err = runCLI(t, "catalog", "show", "nvidia lab gpu", "--json")
	require.NoError(t, err)
	var got struct {
		Hardware struct {
			Name string `json:"name"`
		} `json:"hardware"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Equal(t, "Lab-GPU", got.Hardware.Name)
}
