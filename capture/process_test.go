package capture

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// patience bounds a wait that only a hung worker would exhaust: minutes,
// so that a loaded machine never trips it. Tests of the timeouts
// themselves use short ones on purpose.
const patience = 5 * time.Minute

// startFake starts the fake worker and completes init.
func startFake(t *testing.T, mode string, steps int, stderr *bytes.Buffer) *Process {
	t.Helper()
	opts := fakeWorker(mode, steps)
	opts.StartTimeout = patience
	var log io.Writer // a nil *bytes.Buffer would be a non-nil io.Writer
	if stderr != nil {
		log = stderr
	}
	p, err := StartWorker(opts, log)
	require.NoError(t, err)
	t.Cleanup(p.Kill)
	b, err := Frame(&InitMsg{Type: "init", ProtocolVersion: 1, Device: "cpu", NumGPUBlocks: 64, BlockSize: 16})
	require.NoError(t, err)
	require.NoError(t, p.Send(b))
	return p
}

// stepFrame is a one-request step: request "r" prefilling 4 tokens.
func stepFrame(t *testing.T, id int64) []byte {
	t.Helper()
	b, err := Frame(map[string]any{
		"type": "step", "step_id": id,
		"scheduled_new_reqs": []NewRequestData{{ReqID: "r", PromptTokenIDs: []int32{1, 2, 3, 4}, BlockIDs: []int{0},
			SamplingParams: greedy}},
		"scheduled_cached_reqs":      CachedRequestData{},
		"num_scheduled_tokens":       map[string]int{"r": 4},
		"total_num_scheduled_tokens": 4,
		"finished_req_ids":           []string{},
	})
	require.NoError(t, err)
	return b
}

func TestProcessSession(t *testing.T) {
	requirePython(t, "msgpack")
	var stderr bytes.Buffer
	p := startFake(t, "ok", 0, &stderr)
	var ready ReadyMsg
	_, err := p.Recv(&ready, patience)
	require.NoError(t, err)
	assert.Equal(t, "ready", ready.Type)
	assert.Equal(t, 64, ready.NumGPUBlocks)

	require.NoError(t, p.Send(stepFrame(t, 0)))
	var out OutputMsg
	at, err := p.Recv(&out, patience)
	require.NoError(t, err)
	assert.False(t, at.IsZero(), "the arrival time is stamped")
	assert.False(t, at.After(time.Now()), "the arrival time is not in the future")
	assert.Equal(t, "output", out.Type)
	assert.EqualValues(t, 0, out.StepID)
	assert.Equal(t, map[string]int64{"r": 7}, out.SampledTokenIDs, "the prompt is complete: a token is sampled")
	assert.Positive(t, out.Timings.DeviceNs)

	_, got, err := p.TryRecv(&out)
	require.NoError(t, err)
	assert.False(t, got, "nothing else in flight")

	require.NoError(t, p.Shutdown(patience))
	assert.Contains(t, stderr.String(), "fake-worker: ready", "stderr is copied to the log writer")
}

// TestProcessFailures: each way a worker fails mid-session is a
// WorkerError naming the failure, with the worker's exit status and last
// stderr lines.
func TestProcessFailures(t *testing.T) {
	requirePython(t, "msgpack")
	tests := []struct {
		mode    string
		timeout time.Duration
		err     string
		status  string
		stderr  string
	}{
		{"die", patience, "worker closed its output", "exit status 3", "simulated crash after 0 steps"},
		{"hang", 500 * time.Millisecond, "worker answered nothing for 500ms (hung?)", "still running", "simulated hang after 0 steps"},
		{"garbage", patience, "worker sent a frame that is not a msgpack map", "", "writing garbage"},
		{"huge", patience, "worker sent a frame of 4294967280 bytes: the stream is garbage", "", "writing a huge frame header"},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			p := startFake(t, tc.mode, 0, nil)
			var ready ReadyMsg
			_, err := p.Recv(&ready, patience)
			require.NoError(t, err)
			require.NoError(t, p.Send(stepFrame(t, 0)))
			var out OutputMsg
			_, err = p.Recv(&out, tc.timeout)
			require.Error(t, err)
			var we *WorkerError
			require.True(t, errors.As(err, &we))
			assert.Contains(t, we.Err.Error(), tc.err)
			if tc.status != "" {
				assert.Equal(t, tc.status, we.Status)
			}
			assert.Contains(t, we.Stderr, "fake-worker: ready")
			// stderr is a separate pipe: the worker's last line may reach
			// the tail just after the error was built (garbage, huge).
			if tc.status != "" {
				assert.Contains(t, we.Stderr, tc.stderr)
			} else {
				assert.Eventually(t, func() bool { return strings.Contains(p.stderr.Last(), tc.stderr) },
					patience, 10*time.Millisecond)
			}
			msg := err.Error()
			assert.True(t, strings.HasPrefix(msg, we.Err.Error()), msg)
			assert.Contains(t, msg, "last stderr lines:\n")
		})
	}
}

// TestProcessRefusedInit: the worker's error reply to init is an error
// carrying its message.
func TestProcessRefusedInit(t *testing.T) {
	requirePython(t, "msgpack")
	p := startFake(t, "refuse", 0, nil)
	var ready ReadyMsg
	_, err := p.Recv(&ready, patience)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "worker error: does not fit")
	var we *WorkerError
	require.True(t, errors.As(err, &we))
	assert.Contains(t, we.Stderr, "fake-worker: error: does not fit")
}

func TestStartWorkerMissingInterpreter(t *testing.T) {
	_, err := StartWorker(WorkerOptions{Python: "/nonexistent/python3", Script: "testdata/fake_worker.py"}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "starting worker /nonexistent/python3")
}

func TestTailKeepsLastLines(t *testing.T) {
	var log bytes.Buffer
	tl := &tail{max: 3, log: &log}
	for _, s := range []string{"one\n", "two\nthree\n", "four\n", "five\n"} {
		n, err := tl.Write([]byte(s))
		require.NoError(t, err)
		assert.Equal(t, len(s), n)
	}
	assert.Equal(t, "three\nfour\nfive", tl.Last())
	assert.Equal(t, "one\ntwo\nthree\nfour\nfive\n", log.String(), "everything is copied to the log")
}

func TestWorkerErrorUnwraps(t *testing.T) {
	base := errors.New("boom")
	err := error(&WorkerError{Err: base, Status: "exit status 1", Stderr: "last words"})
	assert.ErrorIs(t, err, base)
	assert.Equal(t, "boom (worker exit status 1); last stderr lines:\nlast words", err.Error())
}

// A worker whose Python lacks a module says which flag or variable chooses
// another interpreter.
func TestWorkerMissingModuleNamesPython(t *testing.T) {
	requirePython(t)
	script := filepath.Join(t.TempDir(), "worker.py")
	require.NoError(t, os.WriteFile(script, []byte("import steplab_no_such_module\n"), 0o644))
	p, err := StartWorker(WorkerOptions{Python: python, Script: script, StartTimeout: patience}, nil)
	require.NoError(t, err)
	t.Cleanup(p.Kill)
	var ready ReadyMsg
	_, err = p.Recv(&ready, patience)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "No module named 'steplab_no_such_module'")
	assert.Contains(t, err.Error(), "point --python or STEPLAB_PYTHON at an interpreter")
	assert.Contains(t, err.Error(), python)
}
