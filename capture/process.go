package capture

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// maxFrame bounds a frame's body, as the protocol does.
const maxFrame = 1 << 30

// WorkerOptions say how to start the worker process.
type WorkerOptions struct {
	// Python is the interpreter (default: $STEPLAB_PYTHON, else python3 on
	// PATH).
	Python string
	// Script is the worker entry point (default: capture/worker/worker.py
	// below the current directory or next to the executable).
	Script string
	// Env is added to the process environment.
	Env []string
	// StartTimeout bounds init (model build, CUDA-graph capture).
	StartTimeout time.Duration
	// StepTimeout bounds the wait for one step's output; a worker that
	// answers nothing for this long is declared hung.
	StepTimeout time.Duration
}

// frame is one message read from the worker, with the time it arrived.
type frame struct {
	body []byte
	at   time.Time
	err  error
}

// Process is a running worker speaking length-prefixed msgpack frames over
// its stdin and stdout. Writes go through a goroutine so that shipping a
// large payload never stalls the scheduler; reads come from another, which
// timestamps each frame as it arrives.
type Process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	frames chan frame
	writes chan []byte
	wdone  chan error
	stderr *tail
	opts   WorkerOptions

	mu      sync.Mutex
	exited  chan struct{}
	waitErr error
}

// tail keeps the last lines a process wrote to stderr, and copies them to
// a log writer.
type tail struct {
	mu      sync.Mutex
	lines   []string
	partial string
	max     int
	log     io.Writer
}

func (t *tail) Write(p []byte) (int, error) {
	if t.log != nil {
		t.log.Write(p)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// Writes need not end at line ends (a traceback arrives in pieces):
	// keep the unfinished line until its end comes.
	text := t.partial + string(p)
	lines := strings.Split(text, "\n")
	t.partial = lines[len(lines)-1]
	t.lines = append(t.lines, lines[:len(lines)-1]...)
	if len(t.lines) > t.max {
		t.lines = append(t.lines[:0], t.lines[len(t.lines)-t.max:]...)
	}
	return len(p), nil
}

// Last returns the last lines of stderr.
func (t *tail) Last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	all := t.lines
	if t.partial != "" {
		all = append(all[:len(all):len(all)], t.partial)
	}
	return strings.Join(all, "\n")
}

// StartWorker starts the worker process. stderrLog receives its stderr
// (nil: discarded, but the last lines are kept for error reports).
func StartWorker(opts WorkerOptions, stderrLog io.Writer) (*Process, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 10 * time.Minute
	}
	if opts.StepTimeout == 0 {
		opts.StepTimeout = 2 * time.Minute
	}
	cmd := exec.Command(opts.Python, "-u", opts.Script)
	cmd.Env = append(os.Environ(), opts.Env...)
	t := &tail{max: 40, log: stderrLog}
	cmd.Stderr = t
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting worker %s %s: %w", opts.Python, opts.Script, err)
	}
	p := &Process{cmd: cmd, stdin: stdin, frames: make(chan frame, 16), writes: make(chan []byte, 4),
		wdone: make(chan error, 1), stderr: t, opts: opts, exited: make(chan struct{})}
	readDone := make(chan struct{})
	go func() {
		p.readLoop(bufio.NewReaderSize(stdout, 1<<20))
		close(readDone)
	}()
	go p.writeLoop()
	go func() {
		// Wait closes the stdout pipe: only after the reader saw its end.
		<-readDone
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.exited)
	}()
	return p, nil
}

// withDefaults fills in the interpreter and the worker script.
func (opts WorkerOptions) withDefaults() (WorkerOptions, error) {
	if opts.Python == "" {
		opts.Python = os.Getenv("STEPLAB_PYTHON")
	}
	if opts.Python == "" {
		opts.Python = "python3"
	}
	if opts.Script == "" {
		s, err := findWorkerScript()
		if err != nil {
			return opts, err
		}
		opts.Script = s
	}
	return opts, nil
}

func findWorkerScript() (string, error) {
	cands := []string{"capture/worker/worker.py"}
	if exe, err := os.Executable(); err == nil {
		dir := exe[:strings.LastIndex(exe, "/")+1]
		cands = append(cands, dir+"../capture/worker/worker.py", dir+"capture/worker/worker.py")
	}
	for _, c := range cands {
		if _, err := os.Stat(c); err == nil {
			return c, nil
		}
	}
	return "", errors.New("cannot find the GPU worker (capture/worker/worker.py): run from the repository root or pass --worker PATH")
}

func (p *Process) readLoop(r *bufio.Reader) {
	defer close(p.frames)
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if !errors.Is(err, io.EOF) {
				p.frames <- frame{err: fmt.Errorf("reading frame header: %w", err)}
			}
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n == 0 || n > maxFrame {
			p.frames <- frame{err: fmt.Errorf("worker sent a frame of %d bytes: the stream is garbage", n)}
			return
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			p.frames <- frame{err: fmt.Errorf("worker stream ended inside a %d-byte frame: %w", n, err)}
			return
		}
		p.frames <- frame{body: body, at: time.Now()}
	}
}

func (p *Process) writeLoop() {
	for b := range p.writes {
		if _, err := p.stdin.Write(b); err != nil {
			p.wdone <- err
			return
		}
	}
	p.wdone <- p.stdin.Close()
}

// Send queues an already-framed message; it does not wait for the write.
func (p *Process) Send(framed []byte) error {
	select {
	case err := <-p.wdone:
		return p.deadErr(fmt.Errorf("writing to worker: %v", err))
	default:
	}
	select {
	case p.writes <- framed:
		return nil
	case <-p.exited:
		return p.deadErr(errors.New("worker exited"))
	}
}

// Frame encodes v as one frame.
func Frame(v any) ([]byte, error) {
	body, err := msgpack.Marshal(v)
	if err != nil {
		return nil, err
	}
	return withHeader(body), nil
}

func withHeader(body []byte) []byte {
	out := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(out, uint32(len(body)))
	copy(out[4:], body)
	return out
}

// Recv waits for the next frame (up to timeout) and decodes it into v,
// returning its arrival time. A worker that dies, hangs or sends garbage
// gives an error carrying its last stderr lines.
func (p *Process) Recv(v any, timeout time.Duration) (time.Time, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case f, ok := <-p.frames:
		return p.decode(f, ok, v)
	case <-timer.C:
		return time.Time{}, p.deadErr(fmt.Errorf("worker answered nothing for %s (hung?)", timeout))
	}
}

// TryRecv returns a frame if one has arrived, without waiting.
func (p *Process) TryRecv(v any) (time.Time, bool, error) {
	select {
	case f, ok := <-p.frames:
		at, err := p.decode(f, ok, v)
		return at, true, err
	default:
		return time.Time{}, false, nil
	}
}

func (p *Process) decode(f frame, ok bool, v any) (time.Time, error) {
	if !ok {
		<-p.waitExit(5 * time.Second)
		return time.Time{}, p.deadErr(errors.New("worker closed its output"))
	}
	if f.err != nil {
		return time.Time{}, p.deadErr(f.err)
	}
	var probe struct {
		Type    string `msgpack:"type"`
		Message string `msgpack:"message"`
	}
	if err := msgpack.Unmarshal(f.body, &probe); err != nil {
		return time.Time{}, p.deadErr(fmt.Errorf("worker sent a frame that is not a msgpack map: %v", err))
	}
	if probe.Type == "error" {
		return time.Time{}, p.deadErr(fmt.Errorf("worker error: %s", probe.Message))
	}
	if err := msgpack.Unmarshal(f.body, v); err != nil {
		return time.Time{}, p.deadErr(fmt.Errorf("worker sent a malformed %q frame: %v", probe.Type, err))
	}
	return f.at, nil
}

func (p *Process) waitExit(d time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		select {
		case <-p.exited:
		case <-time.After(d):
		}
		close(ch)
	}()
	return ch
}

// deadErr decorates err with the worker's exit status and last stderr lines.
// A worker that failed usually exits at once: give it a moment, so that its
// status is known and its last stderr lines have been read.
func (p *Process) deadErr(err error) error {
	select {
	case <-p.exited:
	case <-time.After(2 * time.Second):
	}
	status := "still running"
	select {
	case <-p.exited:
		p.mu.Lock()
		if p.waitErr != nil {
			status = p.waitErr.Error()
		} else {
			status = "exited 0"
		}
		p.mu.Unlock()
	default:
	}
	last := p.stderr.Last()
	if last == "" {
		last = "(nothing)"
	}
	return &WorkerError{Err: err, Status: status, Stderr: last, Python: p.opts.Python}
}

// WorkerError is a failure of the worker process.
type WorkerError struct {
	Err    error
	Status string
	Stderr string
	// Python is the interpreter that ran the worker.
	Python string
}

func (e *WorkerError) Error() string {
	msg := fmt.Sprintf("%v (worker %s); last stderr lines:\n%s", e.Err, e.Status, e.Stderr)
	if strings.Contains(e.Stderr, "No module named") {
		msg += fmt.Sprintf("\nthe worker's Python (%s) lacks a module the worker needs (torch, numpy, msgpack): install them, or point --python or STEPLAB_PYTHON at an interpreter that has them", e.Python)
	}
	return msg
}

func (e *WorkerError) Unwrap() error { return e.Err }

// Shutdown asks the worker to exit and waits for it; it kills a worker
// that does not leave within the grace period.
func (p *Process) Shutdown(grace time.Duration) error {
	if b, err := Frame(map[string]string{"type": "shutdown"}); err == nil {
		_ = p.Send(b)
	}
	close(p.writes)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	return nil
}

// Kill stops the worker at once.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
}
