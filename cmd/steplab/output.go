package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// The CLI contract (docs/cli.md): exit 2 for usage and input errors, an
// existing output refused unless --force.

// refuseExisting refuses an empty output name, and an output that exists
// (but an empty directory) unless force is set: nothing is overwritten
// without --force.
func refuseExisting(cmd, out string, force bool) error {
	if out == "" {
		return &exitError{code: 2, msg: cmd + ": no output: use -o OUT"}
	}
	if _, err := os.Stat(out); err == nil && !force && !emptyDir(out) {
		return &exitError{code: 2, msg: fmt.Sprintf("%s: %s exists: use --force to overwrite it", cmd, out)}
	}
	return nil
}

// emptyDir reports whether path is a directory with nothing in it (a
// fresh mktemp -d): there is nothing to overwrite.
func emptyDir(path string) bool {
	entries, err := os.ReadDir(path)
	return err == nil && len(entries) == 0
}

// forceFlag adds --force (no short form: -f names a scenario file).
func forceFlag(cmd *cobra.Command, force *bool) {
	cmd.Flags().BoolVar(force, "force", false, "overwrite an existing output")
}

// inputError is an error of the command's input (exit 2), named after the
// command once: library errors mostly name their package, which is the
// command's name; the fit package's ("fit: ...") also reach eval and
// check, which say their own name instead.
func inputError(cmd string, err error) error {
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	msg := strings.TrimPrefix(err.Error(), "fit: ")
	if !strings.HasPrefix(msg, cmd+": ") {
		msg = cmd + ": " + msg
	}
	return &exitError{code: 2, msg: msg}
}

// refuseExistingDir is refuseExisting for an output directory a command
// fills with its files: with --force it replaces only a directory that
// holds the command's own output (marker names one of its files) or
// nothing, never another directory (a dataset, a checkout).
func refuseExistingDir(cmd, out string, force bool, marker string) error {
	if err := refuseExisting(cmd, out, force); err != nil {
		return err
	}
	entries, err := os.ReadDir(out)
	if err != nil || len(entries) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(out, marker)); err != nil {
		return &exitError{code: 2, msg: fmt.Sprintf("%s: %s is not a %s output (no %s): choose another directory", cmd, out, cmd, marker)}
	}
	return os.RemoveAll(out)
}
