package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// steplab plan --queue runs the candidates on a worker and prints and
// writes what the same plan run locally does.
func TestPlanOverQueue(t *testing.T) {
	v := newContractVars(t)
	dir := t.TempDir()
	plan := []string{"plan", "{plan}", "--set", "workload.limit=40", "-q"}
	local := steplab(t, append(v.expand(t, plan), "-o", filepath.Join(dir, "local"))...)
	require.Equal(t, 0, local.code, local.stderr)
	parts := filepath.Join(dir, "parts")
	worker := promises{along: []string{"worker", "--queue", "{queue}", "{worker-auth}", "--results", parts, "--max-idle", "1500ms", "--wait-queue", "30s"}}
	queued := v.runAlong(t, worker, append(v.expand(t, plan), "-o", filepath.Join(dir, "queue"), "--queue", "{queue}", "{submitter-auth}",
		"--results", parts, "--timeout", "60s"), false)
	require.Equal(t, 0, queued.code, queued.stderr)
	// The same table, after the queue's line; then each wrote its own path.
	_, after, ok := strings.Cut(queued.stdout, " over nats://")
	require.True(t, ok, queued.stdout)
	_, after, _ = strings.Cut(after, "\n")
	table := func(s string) string { before, _, _ := strings.Cut(s, "\nwrote "); return before }
	assert.Equal(t, table(local.stdout), table(after))
	assert.Contains(t, local.stdout, "8 candidates: 8 simulated")
	for _, f := range []string{"sweep.parquet", "plan.json", "frontier.png", "chosen/scenario.yaml"} {
		a, err := os.ReadFile(filepath.Join(dir, "local", f))
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(dir, "queue", f))
		require.NoError(t, err)
		assert.Equal(t, a, b, f)
	}
}
