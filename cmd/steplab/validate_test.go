package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
)

// runCLI runs steplab with args and returns stdout and the error; stderr
// (logs, progress) is left aside, as a pipe would.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, _, err := runCLILogged(t, args...)
	return out, err
}

// runCLILogged is runCLI that also returns stderr.
func runCLILogged(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := newRootCmd()
	var out, errs lockedBuffer
	cmd.SetOut(&out)
	cmd.SetErr(&errs)
	cmd.SetArgs(args)
	err = cmd.Execute()
	return out.String(), errs.String(), err
}

func cliDataset(t *testing.T, wall int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ds")
	w, err := datasets.Create(dir, datasets.Manifest{Source: datasets.Source{Kind: "test"}}, datasets.CreateOptions{})
	require.NoError(t, err)
	tw, err := datasets.NewTableWriter[datasets.Step](w, datasets.TableSteps, datasets.TableOptions{})
	require.NoError(t, err)
	require.NoError(t, tw.Write([]datasets.Step{{
		StepID: 0, Kind: datasets.KindDecode, Role: datasets.RoleProduction, Valid: true, NumDecodeRequests: 1,
		NumNewReqs: -1, NumCachedReqs: -1, TotalScheduledTokens: 1,
		TScheduleStart: 100, TScheduleEnd: 110, TDispatch: 120, TOutput: 200, TUpdateEnd: 210, WallTimeNs: wall, NarrowTimeNs: 100,
	}}))
	require.NoError(t, tw.Close())
	require.NoError(t, w.Close())
	return dir
}

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestValidateCLI(t *testing.T) {
	cases := []struct {
		name     string
		wall     int64
		args     []string
		wantCode int
		want     string
	}{
		{"valid dataset", 100, nil, 0, "valid: 0 errors, 0 warnings"},
		{"broken wall time", 5, nil, 1, "wall_time_ns 5 != t_output - t_schedule_start"},
		{"broken, json", 5, []string{"--json"}, 1, `"field": "wall_time_ns"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := cliDataset(t, tc.wall)
			out, err := runCLI(t, append([]string{"validate", dir}, tc.args...)...)
			require.Equal(t, tc.wantCode, exitCode(err), "%v\n%s", err, out)
			require.Contains(t, out, tc.want)
		})
	}
	_, err := runCLI(t, "validate", filepath.Join(t.TempDir(), "missing"))
	require.Equal(t, 2, exitCode(err))
	require.ErrorContains(t, err, "missing")
}

func TestInspectCLI(t *testing.T) {
	dir := cliDataset(t, 100)
	out, err := runCLI(t, "inspect", dir)
	require.NoError(t, err)
	require.Regexp(t, `decode\s+1\s+1\s+0\.000`, out)
	out, err = runCLI(t, "inspect", dir, "--json")
	require.NoError(t, err)
	var s struct {
		Steps struct{ Rows int64 } `json:"steps"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &s))
	require.Equal(t, int64(1), s.Steps.Rows)

	out, err = runCLI(t, "inspect", filepath.Join(dir, "steps.parquet", "part-000000.parquet"))
	require.NoError(t, err)
	require.Contains(t, out, "wall_time_ns")
	require.Contains(t, out, "steplab table")

	bad := filepath.Join(t.TempDir(), "x.parquet")
	require.NoError(t, os.WriteFile(bad, []byte("nope"), 0o644))
	_, err = runCLI(t, "inspect", bad)
	require.Equal(t, 2, exitCode(err))
	require.ErrorContains(t, err, "x.parquet")
}

func TestExportCLI(t *testing.T) {
	dir := cliDataset(t, 100)
	out := filepath.Join(t.TempDir(), "out")
	stdout, err := runCLI(t, "export", dir, "--format", "csv", "-o", out)
	require.NoError(t, err)
	require.Regexp(t, `steps\s+1\s+`, stdout)
	b, err := os.ReadFile(filepath.Join(out, "steps.csv"))
	require.NoError(t, err)
	require.Contains(t, string(b), "step_id,worker_id,dp_rank")

	_, err = runCLI(t, "export", dir, "--format", "parquet", "-o", out)
	require.Equal(t, 2, exitCode(err))
	_, err = runCLI(t, "export", dir, "--format", "arrow")
	require.ErrorContains(t, err, "-o OUT")
	_, err = runCLI(t, "export", dir, "--format", "csv", "-o", out)
	require.Equal(t, 2, exitCode(err))
	require.ErrorContains(t, err, "exists: use --force")
	_, err = runCLI(t, "export", dir, "--format", "arrow", "-o", out, "--tables", "requests", "--force")
	require.Equal(t, 2, exitCode(err))
	require.ErrorContains(t, err, `no table "requests"`)
}
