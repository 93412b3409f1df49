package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets the test binary stand in for steplab: TestDocumentedCommands
// runs the documented command lines through a shell with a `steplab` on
// PATH that is this binary, so the code under test is the code being built.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "steplab" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// docNeeds are the words a `# needs:` marker may name (docs/cli.md). A
// marked command runs only where STEPLAB_DOC_NEEDS lists every word it
// needs, e.g. STEPLAB_DOC_NEEDS=long,torch on a machine with PyTorch.
var docNeeds = []string{"gpu", "network", "torch", "long"}

// docCommand is one documented command line, continuations joined, as a
// reader pastes it into a shell from the repository root.
type docCommand struct {
	where string   // file:line, or the help page and its line
	line  string   // the command, verbatim
	needs []string // the words of the `# needs:` marker that covers it
}

// docUnit is a document whose commands run in order in one working
// directory: a later command may read what an earlier one wrote.
type docUnit struct {
	name     string
	commands []docCommand
}

// commandScanner collects command lines from a sequence of lines. A line
// is a command when it starts with `steplab ` or `bin/steplab ` (after an
// optional `$ ` prompt); a trailing `\` continues it on the next line. A
// `# needs: WORD[, WORD] why` comment marks the commands after it up to
// the next blank line or the end of the block.
type commandScanner struct {
	where    func(line int) string
	needs    []string
	open     *docCommand
	commands []docCommand
}

func (s *commandScanner) add(n int, text string) {
	text = strings.TrimSpace(text)
	if s.open != nil {
		s.open.line += "\n" + text
		if !strings.HasSuffix(text, `\`) {
			s.commands = append(s.commands, *s.open)
			s.open = nil
		}
		return
	}
	if text == "" {
		s.needs = nil
		return
	}
	if rest, ok := strings.CutPrefix(text, "# needs:"); ok {
		s.needs = parseNeeds(rest)
		return
	}
	text = strings.TrimPrefix(text, "$ ")
	if !strings.HasPrefix(text, "steplab ") && !strings.HasPrefix(text, "bin/steplab ") {
		return
	}
	c := docCommand{where: s.where(n), line: text, needs: s.needs}
	if strings.HasSuffix(text, `\`) {
		s.open = &c
		return
	}
	s.commands = append(s.commands, c)
}

// end closes a block: a marker covers no command outside it.
func (s *commandScanner) end() {
	if s.open != nil {
		s.commands = append(s.commands, *s.open)
		s.open = nil
	}
	s.needs = nil
}

// parseNeeds reads `gpu, long (why)`: the words before the first one
// that is not followed by a comma.
func parseNeeds(s string) []string {
	var words []string
	for _, f := range strings.Fields(s) {
		w := strings.TrimSuffix(f, ",")
		words = append(words, w)
		if w == f {
			break
		}
	}
	return words
}

// shellFences are the info strings of the fenced blocks that hold commands.
var shellFences = []string{"", "sh", "bash", "shell", "console"}

// markdownCommands returns the command lines of the shell blocks of a
// markdown file (blocks fenced with ``` and no language, sh, bash, shell
// or console).
func markdownCommands(name, text string) []docCommand {
	s := commandScanner{where: func(n int) string { return fmt.Sprintf("%s:%d", name, n) }}
	inBlock, shell := false, false
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			if inBlock {
				s.end()
			}
			inBlock = !inBlock
			shell = inBlock && slices.Contains(shellFences, strings.TrimSpace(strings.TrimPrefix(trimmed, "```")))
			continue
		}
		if shell {
			s.add(i+1, line)
		}
	}
	s.end()
	return s.commands
}

// helpCommands returns the command lines of a help text: its indented
// lines (cobra's convention for examples).
func helpCommands(name, text string) []docCommand {
	s := commandScanner{where: func(n int) string { return fmt.Sprintf("%s, line %d", name, n) }}
	for i, line := range strings.Split(text, "\n") {
		if line != "" && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "\t") {
			s.end()
			continue
		}
		s.add(i+1, line)
	}
	s.end()
	return s.commands
}

// helpUnits returns one unit per command of the CLI: the command lines of
// its Long text, then of its Example, in the order `--help` prints them.
func helpUnits() []docUnit {
	var units []docUnit
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		name := "`" + c.CommandPath() + " --help`"
		cmds := append(helpCommands(name+" Long", c.Long), helpCommands(name+" Example", c.Example)...)
		if len(cmds) > 0 {
			units = append(units, docUnit{name: c.CommandPath(), commands: cmds})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
	return units
}

// markdownUnits returns one unit per markdown file of the repository that
// has commands: README.md and docs/*.md.
func markdownUnits(t *testing.T, root string) []docUnit {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	var units []docUnit
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		rel, err := filepath.Rel(root, f)
		require.NoError(t, err)
		if cmds := markdownCommands(filepath.ToSlash(rel), string(b)); len(cmds) > 0 {
			units = append(units, docUnit{name: filepath.ToSlash(rel), commands: cmds})
		}
	}
	return units
}

// cloneFiles lists the files a fresh clone of the repository at root has
// once the work tree is committed: tracked and untracked, not ignored.
func cloneFiles(t *testing.T, root string) []string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	require.NoError(t, err, "git ls-files lists the files of a fresh clone")
	var files []string
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil { // not deleted in the work tree
			files = append(files, f)
		}
	}
	return files
}

// checkoutCopy makes dir look like a fresh clone of the repository at
// root: its files as symlinks under real directories, so that what a
// command writes lands in dir and never in the repository; a dataset (a
// folder with a manifest.json) is one symlink to its folder, as readers
// refuse parts that are symlinks out of their dataset. bin/steplab is the
// binary under test, as scripts/demo builds it.
func checkoutCopy(t *testing.T, root string, files []string, dir, steplab string) {
	t.Helper()
	datasetDirs := map[string]bool{}
	for _, f := range files {
		if path.Base(f) == "manifest.json" {
			datasetDirs[path.Dir(f)] = true
		}
	}
	linked := map[string]bool{}
	for _, f := range files {
		if d := outermostDataset(f, datasetDirs); d != "" {
			f = d
		}
		if linked[f] {
			continue
		}
		linked[f] = true
		dst := filepath.Join(dir, filepath.FromSlash(f))
		require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
		require.NoError(t, os.Symlink(filepath.Join(root, f), dst))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	require.NoError(t, os.Symlink(steplab, filepath.Join(dir, "bin", "steplab")))
}

// outermostDataset is the outermost dataset folder of datasetDirs that
// holds the file f, or "".
func outermostDataset(f string, datasetDirs map[string]bool) string {
	out := ""
	for d := path.Dir(f); d != "." && d != "/"; d = path.Dir(d) {
		if datasetDirs[d] {
			out = d
		}
	}
	return out
}

// TestDocumentedCommands runs every steplab command line of README.md,
// docs/*.md and every command's --help verbatim, in bash from a copy of a
// fresh clone, one working directory per document so that a command may
// use what an earlier one wrote. A command marked `# needs: ...` is
// skipped unless STEPLAB_DOC_NEEDS lists what it needs; any other command
// that exits non-zero fails with its file and line (docs/cli.md).
func TestDocumentedCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every documented command (about a minute)")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	self, err := os.Executable()
	require.NoError(t, err)
	bin := t.TempDir()
	steplab := filepath.Join(bin, "steplab")
	require.NoError(t, os.Symlink(self, steplab))
	have := strings.Split(os.Getenv("STEPLAB_DOC_NEEDS"), ",")
	env := append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "STEPLAB_CATALOG=")
	}), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	files := cloneFiles(t, root)
	units := append(markdownUnits(t, root), helpUnits()...)
	ran, skipped, byNeed := 0, 0, map[string]int{}
	for _, u := range units {
		for _, c := range u.commands {
			for _, n := range c.needs {
				require.Contains(t, docNeeds, n, "%s: unknown `# needs: %s`", c.where, n)
			}
			if missing := missingNeeds(c.needs, have); len(missing) > 0 {
				skipped++
				byNeed[strings.Join(missing, ",")]++
			} else {
				ran++
			}
		}
	}
	require.NotZero(t, ran, "no documented command found")
	t.Cleanup(func() {
		var parts []string
		for k, n := range byNeed {
			parts = append(parts, fmt.Sprintf("%d need %s", n, k))
		}
		sort.Strings(parts)
		t.Logf("documented commands: %d run, %d skipped (%s; set STEPLAB_DOC_NEEDS to run them)",
			ran, skipped, strings.Join(parts, ", "))
	})

	for _, u := range units {
		t.Run(u.name, func(t *testing.T) {
			t.Parallel()
			work := t.TempDir()
			checkoutCopy(t, root, files, work, steplab)
			for _, c := range u.commands {
				if missing := missingNeeds(c.needs, have); len(missing) > 0 {
					t.Logf("%s: skipped, needs %s: %s", c.where, strings.Join(missing, ","), c.line)
					continue
				}
				runDocCommand(t, work, env, c)
			}
			for _, f := range strayOutputs(t, root, work) {
				t.Errorf("%s: the commands wrote %s, which .gitignore does not cover: write it under out/", u.name, f)
			}
		})
	}
}

// strayOutputs lists the files the commands wrote in work (the clone's
// files are symlinks) that a clone's .gitignore does not ignore, so that a
// reader running the docs in a checkout is left with no untracked paths.
func strayOutputs(t *testing.T, root, work string) []string {
	t.Helper()
	var stray []string
	err := filepath.WalkDir(work, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Type()&os.ModeSymlink != 0 {
			return err
		}
		rel, err := filepath.Rel(work, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "out" {
				return filepath.SkipDir // ignored as a whole
			}
			return nil
		}
		// check-ignore exits 0 for an ignored path, 1 for one it does not ignore.
		if exec.Command("git", "-C", root, "check-ignore", "-q", "--no-index", rel).Run() != nil {
			stray = append(stray, rel)
		}
		return nil
	})
	require.NoError(t, err)
	return stray
}

func missingNeeds(needs, have []string) []string {
	return slices.DeleteFunc(slices.Clone(needs), func(n string) bool { return slices.Contains(have, n) })
}

// runDocCommand runs one documented command to its end, however long a
// loaded machine makes it: a limit on wall time would fail whenever CI's
// machine is busy. What each command took is logged, so a slow one shows
// in `go test -v` and can be made cheaper or marked `# needs: long`.
func runDocCommand(t *testing.T, work string, env []string, c docCommand) {
	t.Helper()
	cmd := exec.Command("bash", "-o", "pipefail", "-c", c.line)
	cmd.Dir = work
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start).Round(10 * time.Millisecond)
	if err != nil {
		t.Errorf("%s: %v after %s:\n%s\n--- output (tail) ---\n%s", c.where, err, took, c.line, tail(out.String(), 2000))
		return
	}
	t.Logf("%s: ok in %s: %s", c.where, took, firstLine(c.line))
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// The extractor finds the command lines a reader would paste, joins
// continuations, strips the prompt, and applies a `# needs:` marker to
// the commands after it up to a blank line or the end of the block.
func TestDocCommandExtraction(t *testing.T) {
	tests := []struct {
		name string
		got  []docCommand
		want []docCommand
	}{
		{"markdown", markdownCommands("d.md", strings.Join([]string{
			"steplab prose outside a block",
			"```sh",
			"$ steplab simulate -o out/a \\",
			"    --set workload.limit=20",
			"bin/steplab inspect out/a   # comment",
			"python -c 'steplab not at the start'",
			"",
			"# needs: gpu, long (a minute on an H200)",
			"steplab capture bench -o out/b",
			"steplab validate out/b",
			"",
			"steplab validate out/a",
			"# needs: network",
			"```",
			"```yaml",
			"steplab in a yaml block",
			"```",
			"```",
			"steplab catalog hardware",
			"```",
		}, "\n")), []docCommand{
			{where: "d.md:3", line: "steplab simulate -o out/a \\\n--set workload.limit=20"},
			{where: "d.md:5", line: "bin/steplab inspect out/a   # comment"},
			{where: "d.md:9", line: "steplab capture bench -o out/b", needs: []string{"gpu", "long"}},
			{where: "d.md:10", line: "steplab validate out/b", needs: []string{"gpu", "long"}},
			{where: "d.md:12", line: "steplab validate out/a"},
			{where: "d.md:19", line: "steplab catalog hardware"},
		}},
		{"help", helpCommands("h", strings.Join([]string{
			"steplab stores traces (prose, not indented)",
			"Examples:",
			"  # needs: torch",
			"  steplab capture traffic -o out/cpu \\",
			"      --device cpu",
			"",
			"  steplab inspect out/cpu --json | jq .",
			"  Usage: steplab inspect PATH",
		}, "\n")), []docCommand{
			{where: "h, line 4", line: "steplab capture traffic -o out/cpu \\\n--device cpu", needs: []string{"torch"}},
			{where: "h, line 7", line: "steplab inspect out/cpu --json | jq ."},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.got)
		})
	}
}

// outputFlags are the flags through which a documented command writes
// (not --results: a sweep's parts folder is shared by design).
var outputFlags = []string{"-o", "--output", "--plots", "--junit"}

// docOutputs returns the paths a command line writes through outputFlags.
func docOutputs(line string) []string {
	fields := strings.Fields(strings.ReplaceAll(line, "\\\n", " "))
	var outs []string
	for i, f := range fields {
		for _, fl := range outputFlags {
			if v, ok := strings.CutPrefix(f, fl+"="); ok {
				outs = append(outs, v)
			} else if f == fl && i+1 < len(fields) {
				outs = append(outs, fields[i+1])
			}
		}
	}
	return outs
}

// TestDocumentedOutputsDistinct: a reader who runs the documents one after
// another in one checkout meets no refusal (an output that exists) and
// leaves nothing outside the ignored out/: every output of a command CI
// runs is under out/, no two documents write the same path, and a
// document that writes a path twice says --force the second time.
func TestDocumentedOutputsDistinct(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	owner := map[string]string{} // output path: the document that writes it
	for _, u := range append(markdownUnits(t, root), helpUnits()...) {
		seen := map[string]bool{}
		for _, c := range u.commands {
			for _, o := range docOutputs(c.line) {
				o = filepath.Clean(o)
				if len(c.needs) == 0 {
					assert.True(t, strings.HasPrefix(o, "out/"), "%s: writes %s, outside out/: %s", c.where, o, firstLine(c.line))
				}
				if prev, ok := owner[o]; ok && prev != u.name {
					assert.Fail(t, "two documents write one output", "%s: %s is also written by %s", c.where, o, prev)
				}
				owner[o] = u.name
				if seen[o] {
					assert.Contains(t, c.line, "--force", "%s: writes %s a second time without --force", c.where, o)
				}
				seen[o] = true
			}
		}
	}
}
