package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/steplab/steplab/internal/inflight"
)

func main() {
	// The first SIGINT or SIGTERM cancels the command's context. A command
	// that watches it (stopsOnCancel) stops and says what it kept; any
	// other is stopped here: its temporary files are removed and it exits
	// 130, leaving only whole files under final names. A second signal
	// kills at once; outputs are renamed into place only when complete,
	// so that too leaves no half-written file under a final name.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
		if !watchesCancel.Load() {
			inflight.Stop()
			fmt.Fprintln(os.Stderr, "steplab: interrupted: stopped before finishing; its temporary files are removed (docs/cli.md, exit codes)")
			os.Exit(130)
		}
	}()
	os.Exit(execute(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// watchesCancel is set when the command being run stops by itself on a
// signal (its cobra annotation stopsOnCancel, on it or a parent).
var watchesCancel atomic.Bool

// stopsOnCancel is the annotation of a command that watches its context:
// on a signal it finishes or removes its open part and returns exit 130.
const stopsOnCancel = "stops-on-cancel"

func markWatchesCancel(cmd *cobra.Command) {
	for c := cmd; c != nil; c = c.Parent() {
		if _, ok := c.Annotations[stopsOnCancel]; ok {
			watchesCancel.Store(true)
			return
		}
	}
}

// execute runs steplab with args and returns its exit status (docs/cli.md):
// an exitError's code, and 2 for any other error (cobra's usage errors
// among them). The contract test runs every command through it.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, "steplab:", ee.msg)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "steplab:", err)
	return 2
}
