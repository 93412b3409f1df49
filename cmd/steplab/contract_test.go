package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-zeromq/zmq4"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets/importers"
)

// promises are what the contract of docs/cli.md asks of one command, as
// its row of the table there says. Arguments name their inputs by
// placeholder (see contractVars); {out} is a fresh output path.
type promises struct {
	run  []string   // succeeds (exit 0)
	fail []string   // a check fails (exit 1)
	bad  [][]string // bad inputs or values (exit 2); nothing is left at {out}
	// out: run writes {out}, which is refused (exit 2) when it exists
	// unless --force is given.
	out bool
	// json: --json prints the report, and only JSON, on stdout.
	json bool
	// progress: a progress bar on stderr when it is a terminal, unless -q.
	progress bool
	// along runs beside each run and must succeed (the sweep a worker
	// serves).
	along []string
	// python: run needs a Python with msgpack for the fake capture worker.
	python bool
	// group: the command only holds subcommands.
	group bool
}

// sweepArgs is a small local sweep of the encoder ensemble.
var sweepArgs = []string{"{ensemble}", "--set", "load.requests=20", "--set", "load.repetitions=1", "--vary", "load.rate_rps=10,20"}

// fakeCapture drives capture/testdata/fake_worker.py on the CPU.
var fakeCapture = []string{"--device", "cpu", "--preset", "tiny", "--python", "{python}", "--worker", "{repo}/capture/testdata/fake_worker.py"}

// cat joins argument lists.
func cat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// contract is the table of docs/cli.md, one row per command.
var contract = map[string]promises{
	"":        {group: true},
	"replay":  {group: true},
	"capture": {group: true},
	"catalog": {group: true},
	"simulate": {run: []string{"simulate", "-o", "{out}", "--set", "workload.limit=20"},
		bad: [][]string{
			{"simulate", "-o", "{out}", "--set", "workload.no_such_key=1"},
			{"simulate", "-o", "{out}", "-f", "{missing}"},
		}, out: true, json: true, progress: true},
	"validate": {run: []string{"validate", "{sim}"}, fail: []string{"validate", "{broken}"},
		bad: [][]string{{"validate", "{missing}"}}, json: true, progress: true},
	"inspect": {run: []string{"inspect", "{sim}"}, bad: [][]string{{"inspect", "{missing}"}, {"inspect", "{unreadable}"}}, json: true},
	"export": {run: []string{"export", "{sim}", "--format", "csv", "-o", "{out}"},
		bad: [][]string{
			{"export", "{missing}", "--format", "csv", "-o", "{out}"},
			{"export", "{unreadable}", "--format", "arrow", "-o", "{out}"},
			{"export", "{sim}", "--format", "parquet", "-o", "{out}"},
			{"export", "{sim}", "--format", "perfetto", "-o", "{out}", "--window", "100000:100001"},
		}, out: true, json: true, progress: true},
	"import": {run: []string{"import", "azure", "{repo}/datasets/importers/testdata/azure-code-2023/AzureLLMInferenceTrace_code_head200.csv", "-o", "{out}"},
		bad: [][]string{{"import", "azure", "{missing}", "-o", "{out}"}, {"import", "no-such-format", "{empty}", "-o", "{out}"}},
		out: true, json: true, progress: true},
	"import table": {run: []string{"import", "table", "{repo}/datasets/testdata/foreign/duckdb/fixtures/steps_renamed.parquet", "-o", "{out}",
		"--table", "steps", "--hardware", "H200", "--model", "Llama-3.1-8B", "--map", "step=step_id,batch_kind=kind,prefill_reqs=num_prefill_requests",
		"--map", "prefill_tokens=sum_prefill_tokens,prefill_kv_tokens=sum_prefill_kv_tokens,decode_reqs=num_decode_requests",
		"--map", "decode_kv_tokens=sum_decode_kv_tokens,wall_ns=wall_time_ns"},
		bad: [][]string{{"import", "table", "{missing}", "-o", "{out}", "--table", "steps", "--hardware", "H200", "--model", "Llama-3.1-8B"}},
		out: true, json: true, progress: true},
	"fit": {run: []string{"fit", "{bench}", "-o", "{out}", "--bootstrap", "10", "--cv", "2"},
		bad: [][]string{
			{"fit", "{bench}", "-o", "{out}", "--bootstrap", "-1"},
			{"fit", "{missing}", "-o", "{out}"},
			{"fit", "{unreadable}", "-o", "{out}"},
		}, out: true, json: true, progress: true},
	"eval": {run: []string{"eval", "{model}", "{sim}"}, bad: [][]string{{"eval", "{missing}", "{sim}"}, {"eval", "{model}", "{unreadable}"}}, json: true, progress: true},
	"check": {run: []string{"check", "{model}", "{sim}", "--max-mape", "1000"},
		fail: []string{"check", "{model}", "{sim}", "--max-mape", "0.0001"},
		bad:  [][]string{{"check", "{model}", "{missing}", "--max-mape", "5"}, {"check", "{model}", "{sim}"}}, json: true, progress: true},
	"replay steps": {run: []string{"replay", "steps", "{model}", "{sim}", "-o", "{out}", "--no-figures"},
		bad: [][]string{{"replay", "steps", "{missing}", "{sim}", "-o", "{out}"}, {"replay", "steps", "{model}", "{unreadable}", "-o", "{out}"}},
		out: true, json: true, progress: true},
	"replay requests": {run: []string{"replay", "requests", "{model}", "{sim}", "-o", "{out}"},
		bad: [][]string{{"replay", "requests", "{missing}", "{sim}", "-o", "{out}"}, {"replay", "requests", "{model}", "{unreadable}", "-o", "{out}"}},
		out: true, json: true, progress: true},
	"calibrate": {run: []string{"calibrate", "{sim}", "-o", "{out}", "--max-evals", "5"},
		bad: [][]string{{"calibrate", "{missing}", "-o", "{out}"}, {"calibrate", "{unreadable}", "-o", "{out}"}}, out: true, json: true, progress: true},
	"whatif": {run: []string{"whatif", "{ensemble}", "-o", "{out}", "--set", "load.requests=20", "--set", "load.repetitions=1"},
		bad: [][]string{{"whatif", "{ensemble}", "-o", "{out}", "--set", "load.rate_rps=-1"}, {"whatif", "{empty}", "-o", "{out}"}},
		out: true, json: true, progress: true},
	"sweep": {run: cat([]string{"sweep", "-o", "{out}"}, sweepArgs),
		bad: [][]string{cat([]string{"sweep", "-o", "{out}"}, sweepArgs, []string{"--set", "load.repetitions=0"}), {"sweep", "{empty}", "-o", "{out}", "--vary", "load.rate_rps=1"}},
		out: true, json: true, progress: true},
	"plan": {run: []string{"plan", "{plan}", "-o", "{out}", "--set", "workload.limit=40"},
		bad: [][]string{{"plan", "{plan}", "-o", "{out}", "--set", "plan.gpus=[{hardware: H100-SXM, count: 1, price_per_hour: 0}]"},
			{"plan", "{plan}", "-o", "{out}", "--max-candidates", "2"}},
		out: true, json: true, progress: true},
	"worker": {run: []string{"worker", "--queue", "{queue}", "{worker-auth}", "--results", "{tmp}/parts", "--max-idle", "1500ms", "--wait-queue", "30s"},
		along: cat([]string{"sweep", "-o", "{tmp}/sweep", "--queue", "{queue}", "{submitter-auth}", "--results", "{tmp}/parts", "--timeout", "60s"}, sweepArgs),
		bad:   [][]string{{"worker", "--queue", "http://127.0.0.1:1", "--results", "{tmp}"}}, json: true},
	"report": {run: []string{"report", "{sim}", "--fpm", "{model}", "-o", "{out}"},
		bad: [][]string{{"report", "{sim}", "--fpm", "{missing}", "-o", "{out}"}, {"report", "{unreadable}", "-o", "{out}"}},
		out: true, json: true, progress: true},
	"capture bench": {run: cat([]string{"capture", "bench", "-o", "{out}", "--set", "workload.benchmark.decode_batch_sizes=[1,2]",
		"--set", "workload.benchmark.decode_contexts=[16]"}, fakeCapture),
		bad: [][]string{cat([]string{"capture", "bench", "-o", "{out}", "--policy", "first_step"}, fakeCapture)},
		out: true, json: true, progress: true, python: true},
	"capture traffic": {run: cat([]string{"capture", "traffic", "-o", "{out}", "--set", "workload.limit=3", "--set", "workload.rate_rps=100"}, fakeCapture),
		bad: [][]string{cat([]string{"capture", "traffic", "-o", "{out}", "--set", "workload.no_such_key=1"}, fakeCapture)},
		out: true, json: true, progress: true, python: true},
	"capture fpm": {run: []string{"capture", "fpm", "--endpoint", "{fpm}", "-o", "{out}", "--duration", "200ms"},
		bad: [][]string{{"capture", "fpm", "--endpoint", "{fpm}", "-o", "{out}", "--duration", "-1s"},
			{"capture", "fpm", "--endpoint", "{fpm}", "-o", "{out}", "--reconnect", "1m", "--reconnect-max", "1s"}}, out: true, json: true},
	"capture ops": {run: []string{"capture", "ops", "-o", "{out}", "--rows", "../../datasets/h200/logs/opbench-h200-worker.jsonl"},
		bad: [][]string{{"capture", "ops", "-o", "{out}"}, {"capture", "ops", "-o", "{out}", "--rows", "{missing}"},
			{"capture", "ops", "-o", "{out}", "--rows", "{unreadable}"}},
		out: true, json: true},
	"catalog hardware":      {run: []string{"catalog", "hardware"}, bad: [][]string{{"catalog", "hardware", "H200"}}, json: true},
	"catalog models":        {run: []string{"catalog", "models"}, bad: [][]string{{"catalog", "models", "tiny"}}, json: true},
	"catalog architectures": {run: []string{"catalog", "architectures"}, bad: [][]string{{"catalog", "architectures", "x"}}, json: true},
	"catalog show":          {run: []string{"catalog", "show", "H200"}, bad: [][]string{{"catalog", "show", "no-such-gpu"}}, json: true},
}

// importSamples are the committed samples the rows of `import FORMAT`
// run on (each format's --help example reads the same).
var importSamples = map[string]string{
	"azure":               "azure-code-2023/AzureLLMInferenceTrace_code_head200.csv",
	"mooncake":            "mooncake-fast25/conversation_trace_head300.jsonl",
	"vllm-requests":       "llmservingsim-rtx4090-llama-3.1-8b/requests.jsonl",
	"dynamo-fpm-artifact": "artifact_complete.json",
	"dynamo-fpm":          "fpm_stream.msgpack",
	"vllm-bench":          "bench-serving/llm-d-benchmark-h100/benchmark_2025-05-13_04-55-27.json",
	"sglang-bench":        "bench-serving/h200-benchmarks-sglang/deepseek_dp_mla_output.jsonl",
	"aiperf":              "aiperf-example/profile_export_head20.jsonl",
	"burstgpt":            "burstgpt/BurstGPT_1_rows.csv",
	"blis":                "blis/qwen3-14b-run.csv",
}

// One row per import format: it imports its sample, and refuses a missing
// file, a --hardware and a --model the catalogue does not know, and a bad
// --engine, each with exit status 2 and nothing written.
func init() {
	for _, f := range importers.Formats() {
		src := "{repo}/datasets/importers/testdata/" + importSamples[f.Name]
		run := []string{"import", f.Name, src, "-o", "{out}"}
		contract["import "+f.Name] = promises{run: run,
			bad: [][]string{{"import", f.Name, "{missing}", "-o", "{out}"},
				cat(run, []string{"--hardware", "no-such-gpu"}), cat(run, []string{"--model", "no-such-model"}),
				cat(run, []string{"--engine", "vllm@latest"})},
			out: true, json: true, progress: true}
	}
}

// TestCLIContract checks every command of the tree against its row of
// the contract: a command without a row fails, so a new command must
// state its promises.
func TestCLIContract(t *testing.T) {
	vars := newContractVars(t)
	seen := map[string]bool{}
	for _, cmd := range allCommands(newRootCmd()) {
		name := strings.TrimPrefix(strings.TrimPrefix(cmd.CommandPath(), "steplab"), " ")
		seen[name] = true
		t.Run("steplab "+name, func(t *testing.T) {
			p, ok := contract[name]
			require.True(t, ok, "no row for %q in the contract table: add one (and to docs/cli.md)", cmd.CommandPath())
			checkFlags(t, cmd, p)
			words := strings.Fields(name)
			help := steplab(t, cat(words, []string{"--help"})...)
			require.Equal(t, 0, help.code, help.stderr)
			assert.Contains(t, help.stdout, "Usage:")
			r := steplab(t, cat(words, []string{"--no-such-flag"})...)
			assert.Equal(t, 2, r.code, "an unknown flag is a usage error")
			assertTells(t, r.stderr)
			if p.group {
				checkGroup(t, words)
				return
			}
			checkBad(t, vars, p)
			if p.fail != nil {
				r := vars.runAlong(t, promises{}, vars.expand(t, p.fail), false)
				assert.Equal(t, 1, r.code, "a failed check exits 1:\n%s", r.stderr)
			}
			if p.python && vars.python == "" {
				if os.Getenv("CI") == "true" {
					t.Fatal("no python3 on PATH imports msgpack (CI=true: apt-get install python3-msgpack)")
				}
				t.Skip("no python3 on PATH imports msgpack: the fake capture worker cannot run (CI installs it)")
			}
			checkRuns(t, vars, p)
		})
	}
	for name := range contract {
		assert.True(t, seen[name], "the contract table has a row for %q, which is not a command", name)
	}
}

// TestCLIContractDocumented holds the table of docs/cli.md to the
// contract's: the same commands, and the same output, --json and progress
// promises.
func TestCLIContractDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	require.NoError(t, err)
	_, page, ok := strings.Cut(string(b), "## Command by command")
	require.True(t, ok, "docs/cli.md has no section \"Command by command\"")
	documented := map[string]bool{}
	for _, line := range strings.Split(page, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 6 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue // not a row of a command
		}
		says := func(i int) bool { return strings.TrimSpace(cells[i]) != "" }
		for _, name := range commandNames(cells[1]) {
			p, ok := contract[name]
			if !assert.True(t, ok, "docs/cli.md lists %q, which the contract table has not", name) {
				continue
			}
			documented[name] = true
			assert.Equal(t, p.out, says(2), "%s: writes -o", name)
			assert.Equal(t, p.json, says(3), "%s: --json", name)
			assert.Equal(t, p.progress, says(4), "%s: progress", name)
		}
	}
	for name, p := range contract {
		assert.True(t, p.group || documented[name], "docs/cli.md does not list %q", name)
	}
}

// commandNames are the commands named in backquotes in a cell, their
// upper-case arguments left out ("`import FORMAT`" is import).
func commandNames(cell string) []string {
	var names []string
	for i, part := range strings.Split(cell, "`") {
		if i%2 == 0 {
			continue
		}
		var words []string
		for _, w := range strings.Fields(part) {
			if w != strings.ToUpper(w) {
				words = append(words, w)
			}
		}
		names = append(names, strings.Join(words, " "))
	}
	return names
}

// allCommands is the command tree, cobra's own help and completion left
// out.
func allCommands(c *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{c}
	for _, s := range c.Commands() {
		if s.Name() != "help" && s.Name() != "completion" {
			out = append(out, allCommands(s)...)
		}
	}
	return out
}

// checkFlags holds the table to the flags: --json, --force and -o/--output
// where the row says so and nowhere else, no short flag for --force, and
// -f only ever for a scenario file.
func checkFlags(t *testing.T, cmd *cobra.Command, p promises) {
	t.Helper()
	if !p.group { // catalog's --json is its subcommands'
		assert.Equal(t, p.json, cmd.Flag("json") != nil, "--json flag")
	}
	force := cmd.Flag("force")
	assert.Equal(t, p.out, force != nil, "--force flag")
	if force != nil {
		assert.Empty(t, force.Shorthand, "--force has no short flag")
	}
	if p.out {
		if o := cmd.Flag("output"); assert.NotNil(t, o, "--output flag") {
			assert.Equal(t, "o", o.Shorthand)
		}
	}
	if f := cmd.Flags().ShorthandLookup("f"); f != nil {
		assert.Equal(t, "scenario", f.Name, "-f names a scenario file")
	}
}

// checkGroup: a group alone shows its help; an unknown subcommand is a
// usage error.
func checkGroup(t *testing.T, words []string) {
	t.Helper()
	r := steplab(t, words...)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "Available Commands:")
	r = steplab(t, cat(words, []string{"no-such-command"})...)
	assert.Equal(t, 2, r.code, "an unknown subcommand is a usage error")
	assert.Contains(t, r.stderr, `unknown command "no-such-command"`)
	assertTells(t, r.stderr)
}

// checkBad: a bad input or value exits 2 with a message, and leaves
// nothing at the output path.
func checkBad(t *testing.T, vars *contractVars, p promises) {
	t.Helper()
	require.NotEmpty(t, p.bad, "the row has no bad input to try")
	for _, bad := range p.bad {
		args, out := vars.expandOut(t, bad)
		r := vars.runAlong(t, promises{}, args, false)
		assert.Equal(t, 2, r.code, "%v is a usage or input error:\n%s", bad, r.stderr)
		assertTells(t, r.stderr)
		if p.out {
			assert.NoFileExists(t, out, "%v leaves nothing at its output", bad)
			assert.NoDirExists(t, out, "%v leaves nothing at its output", bad)
		}
	}
}

// checkRuns runs a command that succeeds: at a terminal (with its progress
// bar, if it has one), again onto its own output (refused without
// --force), with --json in a pipe (no bar; only JSON on stdout) and with
// -q at a terminal (no bar, no info logs).
func checkRuns(t *testing.T, vars *contractVars, p promises) {
	t.Helper()
	args, out := vars.expandOut(t, p.run)
	r := vars.runAlong(t, p, args, true)
	require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.Equal(t, p.progress, hasBar(r.stderr), "a progress bar at a terminal:\n%q", r.stderr)
	if p.out {
		before := snapshot(t, out)
		require.NotEmpty(t, before, "the run wrote nothing at %s", out)
		again := vars.runAlong(t, promises{}, args, false)
		assert.Equal(t, 2, again.code, "an existing output is refused without --force")
		assert.Contains(t, again.stderr, "--force", "the refusal says how to overwrite")
		assertTells(t, again.stderr)
		assert.Equal(t, before, snapshot(t, out), "a refused run leaves the output as it was")
		args = append(args, "--force")
	}
	jsonArgs := args
	if p.json {
		jsonArgs = append(jsonArgs, "--json")
	}
	r = vars.runAlong(t, p, jsonArgs, false)
	require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.False(t, hasBar(r.stderr), "no progress bar when stderr is not a terminal:\n%q", r.stderr)
	if p.json {
		assertOnlyJSON(t, r.stdout)
	}
	r = vars.runAlong(t, p, append([]string{"-q"}, args...), true)
	require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	assert.False(t, hasBar(r.stderr), "no progress bar with -q:\n%q", r.stderr)
	assert.NotContains(t, r.stderr, "level=INFO", "-q leaves only warnings and errors")
}

// hasBar reports a progress bar: it redraws its line with carriage
// returns, which no log line or message has.
func hasBar(stderr string) bool { return strings.Contains(stderr, "\r") }

// assertTells: an error message is one message, named once: no
// "fit: fit:" stutter.
func assertTells(t *testing.T, stderr string) {
	t.Helper()
	require.True(t, strings.HasPrefix(stderr, "steplab: ") || strings.Contains(stderr, "\nsteplab: "), "no error message:\n%s", stderr)
	for _, line := range strings.Split(stderr, "\n") {
		segs := strings.Split(line, ": ")
		for i := 1; i < len(segs); i++ {
			a, b := strings.Fields(segs[i-1]), strings.Fields(segs[i])
			if len(a) > 0 && len(b) > 0 {
				assert.NotEqual(t, a[0], b[0], "the message stutters: %s", line)
			}
		}
	}
}

// assertOnlyJSON: stdout is JSON values (one report, or one line per
// event) and nothing else.
func assertOnlyJSON(t *testing.T, stdout string) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	n := 0
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "stdout is not only JSON:\n%s", stdout)
		n++
	}
	assert.Positive(t, n, "--json printed nothing")
}

// snapshot lists every file under path with its size and time, to see
// that it was left alone.
func snapshot(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, p+" "+strconv.FormatInt(info.Size(), 10)+" "+info.ModTime().String())
		return nil
	})
	require.NoError(t, err)
	return out
}

// result is one run of steplab.
type result struct {
	code           int
	stdout, stderr string
}

// steplab runs the command line in-process, as main does.
func steplab(t *testing.T, args ...string) result {
	t.Helper()
	var out, errs lockedBuffer
	code := execute(context.Background(), args, &out, &errs)
	return result{code, out.String(), errs.String()}
}

// lockedBuffer takes writes from the goroutines of a command (logs and a
// progress bar).
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// contractVars are the inputs the rows name: small datasets made once, a
// model fitted on them, an FPM publisher, and the repository.
type contractVars struct {
	vars   map[string]string
	python string // a python3 on PATH with msgpack, or ""
}

func newContractVars(t *testing.T) *contractVars {
	t.Helper()
	dir := t.TempDir()
	v := &contractVars{vars: map[string]string{
		"{repo}":       filepath.Join("..", ".."),
		"{ensemble}":   ensemble,
		"{plan}":       filepath.Join("..", "..", "examples", "plan", "llama8b-azure.yaml"),
		"{sim}":        filepath.Join(dir, "sim"),
		"{bench}":      filepath.Join(dir, "bench"),
		"{model}":      filepath.Join(dir, "model.json"),
		"{broken}":     cliDataset(t, 5),
		"{unreadable}": filepath.Join(dir, "unreadable"),
		"{empty}":      filepath.Join(dir, "empty.yaml"),
		"{missing}":    filepath.Join(dir, "missing"),
	}}
	require.NoError(t, os.MkdirAll(v.vars["{unreadable}"], 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(v.vars["{unreadable}"], "manifest.json"), []byte("{not json"), 0o644))
	require.NoError(t, os.WriteFile(v.vars["{empty}"], nil, 0o644))
	for _, args := range [][]string{
		{"simulate", "-o", "{sim}", "--set", "workload.limit=40"},
		{"simulate", "-o", "{bench}", "--set", "workload.kind=benchmark"},
		{"fit", "{bench}", "-o", "{model}", "--bootstrap", "10", "--cv", "2"},
	} {
		r := steplab(t, v.expand(t, args)...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
	}
	v.vars["{fpm}"] = fpmEndpoint(t)
	v.python = pythonWithMsgpack()
	v.vars["{python}"] = v.python
	return v
}

// expand replaces the placeholders of the inputs in args.
func (v *contractVars) expand(t *testing.T, args []string) []string {
	t.Helper()
	return replace(args, v.vars)
}

// expandOut is expand with {out} a fresh output path, which it returns.
func (v *contractVars) expandOut(t *testing.T, args []string) ([]string, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	return replace(v.expand(t, args), map[string]string{"{out}": out}), out
}

// runAlong runs args, with stderr taken for a terminal or not, beside the
// row's along command; the two share a fresh {tmp} directory and, when
// they name one, a fresh {queue}: the server of examples/nats/steplab.conf,
// auth on, with {worker-auth} and {submitter-auth} its users' flags.
func (v *contractVars) runAlong(t *testing.T, p promises, args []string, terminal bool) result {
	t.Helper()
	saved := isTerminal
	isTerminal = func(io.Writer) bool { return terminal }
	defer func() { isTerminal = saved }()
	fresh := map[string]string{"{tmp}": t.TempDir()}
	var auth map[string][]string
	if strings.Contains(strings.Join(append(args, p.along...), " "), "{queue}") {
		url, submitter, worker := authServer(t)
		fresh["{queue}"], auth = url, map[string][]string{"{worker-auth}": worker, "{submitter-auth}": submitter}
	}
	args = splice(replace(args, fresh), auth)
	if p.along == nil {
		return steplab(t, args...)
	}
	along := splice(replace(v.expand(t, append([]string{"-q"}, p.along...)), fresh), auth)
	done := make(chan result, 1)
	go func() { done <- steplab(t, along...) }()
	res := steplab(t, args...)
	a := <-done
	require.Equal(t, 0, a.code, "%v:\n%s", along, a.stderr)
	return res
}

// replace replaces the placeholders of args by their values.
func replace(args []string, values map[string]string) []string {
	var pairs []string
	for k, x := range values {
		pairs = append(pairs, k, x)
	}
	r := strings.NewReplacer(pairs...)
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = r.Replace(a)
	}
	return out
}

// splice replaces each argument that is a key of flags by its flags.
func splice(args []string, flags map[string][]string) []string {
	var out []string
	for _, a := range args {
		if f, ok := flags[a]; ok {
			out = append(out, f...)
			continue
		}
		out = append(out, a)
	}
	return out
}

// fpmEndpoint is a ZMQ PUB socket on loopback that publishes nothing: a
// Dynamo FPM publisher of an idle engine.
func fpmEndpoint(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pub := zmq4.NewPub(ctx, zmq4.WithLogger(log.New(io.Discard, "", 0)))
	require.NoError(t, pub.Listen("tcp://127.0.0.1:0"))
	t.Cleanup(func() { pub.Close(); cancel() })
	return "tcp://127.0.0.1:" + strconv.Itoa(pub.Addr().(*net.TCPAddr).Port)
}

// pythonWithMsgpack finds a python3 on PATH that imports msgpack, as the
// fake capture worker needs ("" if none).
func pythonWithMsgpack() string {
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(dir, "python3")
		if exec.Command(p, "-c", "import msgpack").Run() == nil {
			return p
		}
	}
	return ""
}
