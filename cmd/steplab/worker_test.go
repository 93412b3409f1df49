package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/sweep/dist"
)

// authServer runs the server of examples/nats/steplab.conf (auth on) on a
// random loopback port, and returns its address and the flags of its
// submitter and worker users (passwords in files).
func authServer(t *testing.T) (url string, submitter, worker []string) {
	t.Helper()
	dir := t.TempDir()
	flags := func(user, env string) []string {
		pw := filepath.Join(dir, user)
		require.NoError(t, os.WriteFile(pw, []byte(user+"-password\n"), 0o600))
		t.Setenv(env, user+"-password")
		return []string{"--user", user, "--password-file", pw}
	}
	submitter = flags("steplab-submitter", "STEPLAB_SUBMITTER_PASSWORD")
	worker = flags("steplab-worker", "STEPLAB_WORKER_PASSWORD")
	opts, err := server.ProcessConfigFile("../../examples/nats/steplab.conf")
	require.NoError(t, err)
	opts.Port, opts.StoreDir, opts.NoLog, opts.NoSigs = -1, t.TempDir(), true, true
	s, err := server.NewServer(opts)
	require.NoError(t, err)
	go s.Start()
	require.True(t, s.ReadyForConnections(5*time.Minute))
	t.Cleanup(s.Shutdown)
	url = s.ClientURL()
	require.True(t, strings.HasPrefix(url, "nats://127.0.0.1:"), url)
	return url, submitter, worker
}

// TestSweepOverQueueCLI runs steplab sweep --queue against an embedded
// JetStream server with auth on, on loopback, with two steplab worker
// commands, then the Indexed Job path (--point, --merge): both give the
// local sweep's files.
func TestSweepOverQueueCLI(t *testing.T) {
	url, submitter, worker := authServer(t)

	base := []string{ensemble, "--set", "load.requests=60", "--set", "load.repetitions=2", "--vary", "load.rate_rps=20,40,80"}
	local := filepath.Join(t.TempDir(), "local")
	_, err := runCLI(t, append([]string{"sweep", "-o", local}, base...)...)
	require.NoError(t, err)

	parts := t.TempDir()
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := runCLI(t, append([]string{"worker", "--queue", url, "--results", parts, "--max-idle", "1500ms", "--wait-queue", "20s"},
				worker...)...)
			assert.NoError(t, err, out)
		}()
	}
	dist := filepath.Join(t.TempDir(), "dist")
	out, err := runCLI(t, append(append([]string{"sweep", "-o", dist, "--queue", url, "--results", parts, "--json", "--timeout", "30s"},
		submitter...), base...)...)
	require.NoError(t, err, out)
	assert.Contains(t, out, `"event":"submitted"`)
	assert.Contains(t, out, `"event":"complete"`)
	wg.Wait()
	sameFiles(t, local, dist)
	// Resubmitted with --resume: every part is there, nothing to run.
	again := filepath.Join(t.TempDir(), "again")
	out, err = runCLI(t, append(append([]string{"sweep", "-o", again, "--queue", url, "--results", parts, "--resume", "--timeout", "5s"},
		submitter...), base...)...)
	require.NoError(t, err, out)
	assert.Contains(t, out, "3 points in")
	sameFiles(t, local, again)

	// The Indexed Job path.
	var manifest bytes.Buffer
	out, err = runCLI(t, append([]string{"sweep", "--emit", "k8s-indexed-job", "--parallelism", "2"}, base...)...)
	require.NoError(t, err)
	manifest.WriteString(out)
	assert.Contains(t, manifest.String(), "completionMode: Indexed")
	assert.Contains(t, manifest.String(), "completions: 3")
	assert.Contains(t, manifest.String(), `"$(JOB_COMPLETION_INDEX)"`)
	pods := t.TempDir()
	for i := 0; i < 3; i++ {
		_, err := runCLI(t, append([]string{"sweep", "--point", []string{"0", "1", "2"}[i], "--results", pods}, base...)...)
		require.NoError(t, err)
	}
	merged := filepath.Join(t.TempDir(), "merged")
	_, err = runCLI(t, "sweep", "--merge", pods, "-o", merged, "--timeout", "1s")
	require.NoError(t, err)
	sameFiles(t, local, merged)
	for _, bad := range [][]string{{"--point", "3"}, {"--point", "-5"}, {"--point", "1000000000"}, {"--point", "0", "--sweep-id", ".."},
		{"--point", "0", "--sweep-id", "a*b>c"}} {
		_, err = runCLI(t, append(append([]string{"sweep", "--results", pods}, bad...), base...)...)
		assert.Equal(t, 2, exitCode(err), "%v", bad)
	}
	_, err = runCLI(t, append([]string{"sweep", "--emit", "helm"}, base...)...)
	assert.Equal(t, 2, exitCode(err))
	_, err = runCLI(t, append([]string{"sweep", "-o", filepath.Join(t.TempDir(), "bad-url"), "--queue", "http://127.0.0.1:1"}, base...)...)
	assert.Equal(t, 2, exitCode(err))
	assert.ErrorContains(t, err, "want nats://HOST:PORT")
	// Without an identity the server refuses; bad identity flags exit 2.
	_, err = runCLI(t, append([]string{"sweep", "-o", filepath.Join(t.TempDir(), "anon"), "--queue", url}, base...)...)
	assert.Equal(t, 1, exitCode(err))
	assert.ErrorContains(t, err, "Authorization Violation")
	_, err = runCLI(t, "worker", "--queue", url, "--results", t.TempDir(), "--user", "steplab-worker")
	assert.Equal(t, 2, exitCode(err))
	assert.ErrorContains(t, err, "give --password-file FILE or set $STEPLAB_NATS_PASSWORD")
	_, err = runCLI(t, "worker", "--queue", "nats://u:secret@127.0.0.1:1", "--results", t.TempDir())
	assert.Equal(t, 2, exitCode(err))
	assert.NotContains(t, err.Error(), "secret")
	// An existing output is refused before the queue is asked.
	_, err = runCLI(t, append([]string{"sweep", "-o", dist, "--queue", url}, base...)...)
	assert.Equal(t, 2, exitCode(err))
	assert.ErrorContains(t, err, "use --force")
}

func sameFiles(t *testing.T, a, b string) {
	t.Helper()
	ents, err := os.ReadDir(a)
	require.NoError(t, err)
	require.NotEmpty(t, ents)
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		x, err := os.ReadFile(filepath.Join(a, e.Name()))
		require.NoError(t, err)
		y, err := os.ReadFile(filepath.Join(b, e.Name()))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(x, y), "%s differs", e.Name())
	}
}

// TestSweepPointPathsFrom: a calibrate point whose scenario was copied
// away from its datasets (as into a pod's /scenario) finds them with
// --paths-from, and says which dataset is missing without it.
func TestSweepPointPathsFrom(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("../../examples/placement/calibrate-h200.yaml")
	require.NoError(t, err)
	scn := filepath.Join(dir, "calibrate-h200.yaml")
	require.NoError(t, os.WriteFile(scn, b, 0o644))
	args := []string{"sweep", scn, "--vary", "holdout=0.2", "--set", "max_evals=5", "--point", "0"}
	out, err := runCLI(t, append(args, "--results", filepath.Join(dir, "a"), "--paths-from", "../../examples/placement")...)
	require.NoError(t, err)
	assert.Contains(t, out, "-000000.parquet")
	_, err = runCLI(t, append(args, "--results", filepath.Join(dir, "b"))...)
	assert.Equal(t, 2, exitCode(err))
	assert.ErrorContains(t, err, "traffic-azure-5rps: no such file or directory")
}

// TestWorkerStoppedMidPoint: a steplab worker process gets a signal while
// it holds a point (its STEPLAB_HELD record names it); the sweep is
// byte-identical to the local one. Killed (SIGKILL), its record stays and
// the point is redelivered after the ack wait. Interrupted (SIGINT,
// SIGTERM), it exits 130 having handed the point back: the ack wait is an
// hour, so the sweep completes only if the point is redelivered at once.
func TestWorkerStoppedMidPoint(t *testing.T) {
	url, submitter, worker := authServer(t)
	base := []string{ensemble, "--set", "load.requests=1500", "--vary", "load.rate_rps=20,40,80"}
	local := filepath.Join(t.TempDir(), "local")
	_, err := runCLI(t, append([]string{"sweep", "-o", local}, base...)...)
	require.NoError(t, err)
	for _, c := range []struct {
		sig     syscall.Signal
		ackWait string
	}{
		{syscall.SIGKILL, "1s"},
		{syscall.SIGINT, "1h"},
		{syscall.SIGTERM, "1h"},
	} {
		t.Run(c.sig.String(), func(t *testing.T) {
			parts, name := t.TempDir(), "victim-"+c.sig.String() // held records outlive a subtest
			victim := startSteplab(t, append([]string{"worker", "--queue", url, "--results", parts, "--name", name}, worker...)...)
			dist := filepath.Join(t.TempDir(), "dist")
			done := make(chan error, 1)
			go func() {
				out, err := runCLI(t, append(append([]string{"sweep", "-o", dist, "--queue", url, "--results", parts, "--ack-wait", c.ackWait,
					"--timeout", "1h"}, submitter...), base...)...)
				if err != nil {
					err = fmt.Errorf("%w: %s", err, out)
				}
				done <- err
			}()
			held, key := signalWhenHeld(t, url, victim, name, c.sig)
			code := victim.exit(t)
			e, err := held.Get(context.Background(), key)
			if c.sig == syscall.SIGKILL {
				assert.Equal(t, -1, code, "killed by the signal")
				require.NoError(t, err, "the victim had finished its point")
				assert.Contains(t, string(e.Value()), `"worker":"`+name+`"`, "killed mid-point: its record of the point stays")
			} else {
				require.Equal(t, 130, code, victim.stderr.String())
				assert.Contains(t, victim.stderr.String(), "worker "+name+" interrupted: 1 task(s) in flight handed back for redelivery")
				if err == nil {
					assert.NotContains(t, string(e.Value()), `"worker":"`+name+`"`, "an interrupted worker removes its record of the point")
				}
			}
			out, err := runCLI(t, append([]string{"worker", "--queue", url, "--results", parts, "--max-idle", "3s", "--name", "survivor"}, worker...)...)
			require.NoError(t, err, out)
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(hangGuard):
				t.Fatalf("the sweep did not complete within %v: the victim's point was not redelivered", hangGuard)
			}
			sameFiles(t, local, dist)
		})
	}
}

// signalWhenHeld sends sig to the worker victim, named name, once its
// STEPLAB_HELD record says it holds a point, and returns the bucket and the
// record's key.
func signalWhenHeld(t *testing.T, url string, victim *proc, name string, sig syscall.Signal) (jetstream.KeyValue, string) {
	t.Helper()
	nc, err := nats.Connect(url, nats.UserInfo("steplab-submitter", "steplab-submitter-password"))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	var held jetstream.KeyValue
	require.Eventually(t, func() bool {
		held, err = js.KeyValue(context.Background(), dist.HeldBucket)
		return err == nil
	}, hangGuard, 20*time.Millisecond, "the sweep creates its buckets")
	w, err := held.WatchAll(context.Background())
	require.NoError(t, err)
	defer w.Stop()
	for e := range w.Updates() {
		var h dist.Held
		if e != nil && e.Operation() == jetstream.KeyValuePut && json.Unmarshal(e.Value(), &h) == nil && h.Worker == name {
			require.NoError(t, victim.cmd.Process.Signal(sig))
			return held, e.Key()
		}
	}
	t.Fatal("the held watch ended")
	return nil, ""
}
