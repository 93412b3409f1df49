package main

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/validate"
)

// These tests run this test binary as steplab (TestMain) in a subprocess
// and send it real signals. They wait for what the process has written,
// never for a time; hangGuard only catches a process that never gets
// there.
const hangGuard = 3 * time.Minute

type proc struct {
	cmd    *exec.Cmd
	stderr strings.Builder
	done   chan struct{}
}

// startSteplab starts steplab with args.
func startSteplab(t *testing.T, args ...string) *proc {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "steplab")
	require.NoError(t, os.Symlink(self, bin))
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Stderr = &p.stderr
	require.NoError(t, p.cmd.Start())
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.done })
	return p
}

// waitUntil polls cond until it holds; it fails the test if the process
// exits first or hangGuard passes.
func (p *proc) waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		select {
		case <-p.done:
			t.Fatalf("steplab exited (%v) before %s; stderr: %s", p.cmd.ProcessState, what, p.stderr.String())
		default:
		}
		require.False(t, time.Now().After(deadline), "no %s within %v", what, hangGuard)
		time.Sleep(2 * time.Millisecond)
	}
}

// exit waits for the process and returns its exit code (-1 when a signal
// killed it).
func (p *proc) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(hangGuard):
		t.Fatalf("steplab did not exit within %v after the signal", hangGuard)
	}
	return p.cmd.ProcessState.ExitCode()
}

// committedParts is the number of parts the manifest at dir lists.
func committedParts(dir string) int {
	m, err := datasets.ReadManifest(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, ti := range m.Tables {
		n += len(ti.Parts)
	}
	return n
}

// SIGKILL at a seeded number of commits: the dataset keeps every committed
// part, its tables cut at one step, and validates as partial with no
// error; the next run into the path replaces it.
func TestSimulateKilled(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			commits := 1 + rand.New(rand.NewPCG(seed, 24)).IntN(4) // the replay key: seed → commits
			dir := filepath.Join(t.TempDir(), "ds")
			p := startSteplab(t, "simulate", "-o", dir)
			p.waitUntil(t, fmt.Sprintf("%d committed parts", 3*commits), func() bool { return committedParts(dir) >= 3*commits })
			require.NoError(t, p.cmd.Process.Kill())
			require.Equal(t, -1, p.exit(t), "killed by the signal")

			d, err := datasets.Open(dir)
			require.NoError(t, err)
			require.Equal(t, datasets.DatasetPartial, d.Manifest.Status)
			rep, err := d.Check()
			require.NoError(t, err)
			require.True(t, rep.OK(), "seed %d: %v", seed, rep.Problems())
			for _, table := range []string{datasets.TableSteps, datasets.TableStepRequests, datasets.TableRequests} {
				ti := d.Manifest.Tables[table]
				assert.GreaterOrEqual(t, len(ti.Parts), commits, table)
				for _, part := range ti.Parts {
					assert.LessOrEqual(t, part.Rows, int64(datasets.PartRows), part.File)
				}
			}
			steps, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
			require.NoError(t, err)
			srs, err := datasets.ReadAll[datasets.StepRequest](d, datasets.TableStepRequests)
			require.NoError(t, err)
			assert.Equal(t, steps[len(steps)-1].StepID, srs[len(srs)-1].StepID, "step_requests end at the last step kept")

			v, err := validate.Dataset(dir, validate.Options{})
			require.NoError(t, err)
			assert.True(t, v.Partial)
			assert.Zero(t, v.Errors, "violations: %v", v.Violations)

			next := startSteplab(t, "simulate", "-o", dir, "--force", "--set", "workload.limit=50")
			require.Equal(t, 0, next.exit(t), next.stderr.String())
			m, err := datasets.ReadManifest(dir)
			require.NoError(t, err)
			assert.Equal(t, datasets.DatasetComplete, m.Status)
			ls, err := datasets.Leftovers(dir)
			require.NoError(t, err)
			assert.Empty(t, ls)
		})
	}
}

// A --force run killed part-way leaves the old dataset byte for byte; its
// staging directory is named by validate and removed by the next run.
func TestSimulateForceKilledKeepsOld(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	_, err := runCLI(t, "simulate", "-o", dir, "--set", "workload.limit=100")
	require.NoError(t, err)
	before, err := datasets.DirSHA256(dir)
	require.NoError(t, err)

	p := startSteplab(t, "simulate", "-o", dir, "--force")
	staging := filepath.Join(filepath.Dir(dir), fmt.Sprintf(".ds.replacing-%d", p.cmd.Process.Pid))
	p.waitUntil(t, "a committed part in the staging directory", func() bool { return committedParts(staging) > 0 })
	require.NoError(t, p.cmd.Process.Kill())
	p.exit(t)

	after, err := datasets.DirSHA256(dir)
	require.NoError(t, err)
	assert.Equal(t, before, after, "the old dataset is untouched")
	v, err := validate.Dataset(dir, validate.Options{})
	require.NoError(t, err)
	assert.Zero(t, v.Errors)
	var named bool
	for _, x := range v.Violations {
		named = named || (x.Table == validate.TableLeftovers && strings.Contains(x.Part, ".ds.replacing-"))
	}
	assert.True(t, named, "validate names the staging directory: %v", v.Violations)

	_, err = runCLI(t, "simulate", "-o", dir, "--force", "--set", "workload.limit=50")
	require.NoError(t, err)
	assert.NoDirExists(t, staging, "the next run into the path removes it")
}

// tempNames lists what under root has a temporary or staging name.
func tempNames(t *testing.T, root string) []string {
	var out []string
	require.NoError(t, filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		n := e.Name()
		if strings.Contains(n, ".tmp") || strings.Contains(n, ".importing-") || strings.Contains(n, ".replacing-") {
			out = append(out, path)
		}
		return nil
	}))
	return out
}

// readsUnder reports whether process pid has a file under dir open.
func readsUnder(pid int, dir string) bool {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.HasPrefix(l, dir+"/") {
			return true
		}
	}
	return false
}

// Commands that do not watch their context stop on the first SIGINT or
// SIGTERM once at work: exit 130, no temporary file or staging directory
// left, and an output under its final name only when whole.
func TestSignalStopsCommand(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc to see that the command is at work")
	}
	root := t.TempDir()
	ds := filepath.Join(root, "ds")
	_, err := runCLI(t, "simulate", "-o", ds)
	require.NoError(t, err)
	cases := []struct {
		name string
		args func(out string) []string
		sig  syscall.Signal
		busy func(p *proc, out string) bool // the command is at work
	}{
		{"import", func(out string) []string { return []string{"import", "azure", "embedded:azure-conv-2023", "-o", out} }, syscall.SIGINT,
			func(p *proc, out string) bool { return isDir(stagingOf(out, p)) }},
		{"validate", func(string) []string { return []string{"validate", ds} }, syscall.SIGTERM,
			func(p *proc, _ string) bool { return readsUnder(p.cmd.Process.Pid, ds) }},
		{"export", func(out string) []string { return []string{"export", ds, "--format", "csv", "-o", out} }, syscall.SIGINT,
			func(p *proc, out string) bool { return len(tempNames(t, filepath.Dir(out))) > 0 }},
		{"fit", func(out string) []string { return []string{"fit", ds, "-o", out + ".json"} }, syscall.SIGTERM,
			func(p *proc, _ string) bool { return readsUnder(p.cmd.Process.Pid, ds) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			p := startSteplab(t, c.args(out)...)
			p.waitUntil(t, "the command at work", func() bool { return c.busy(p, out) })
			require.NoError(t, p.cmd.Process.Signal(c.sig))
			require.Equal(t, 130, p.exit(t), p.stderr.String())
			assert.Contains(t, p.stderr.String(), "interrupted")
			assert.Empty(t, tempNames(t, filepath.Dir(out)), "temporary files left")
			if c.name == "import" {
				assert.NoDirExists(t, out, "an interrupted import writes nothing at its path")
			}
		})
	}
}

// stagingOf is the staging directory an import running as p writes.
func stagingOf(out string, p *proc) string {
	return filepath.Join(filepath.Dir(out), fmt.Sprintf(".%s.importing-%d", filepath.Base(out), p.cmd.Process.Pid))
}
