package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/steplab/steplab/capture"
)

func newCaptureFPMCmd() *cobra.Command {
	var (
		endpoint, out   string
		duration, every time.Duration
		dialTimeout     time.Duration
		reconnect       time.Duration
		reconnectMax    time.Duration
		maxSteps        int64
		asJSON, force   bool
	)
	cmd := &cobra.Command{
		Use:   "fpm --endpoint tcp://HOST:PORT -o DIR [--duration D] [--max-steps N]",
		Short: "Record a live Dynamo ForwardPassMetrics stream (ZMQ) as steps",
		Long: `fpm subscribes to the ForwardPassMetrics stream of a running Dynamo vLLM
worker (started with --scheduler-cls dynamo.vllm.instrumented_scheduler.InstrumentedScheduler;
the engine publishes on ZMQ PUB tcp://*:20380+dp_rank, or DYN_FORWARDPASS_METRIC_PORT)
and writes one steps row per message as it arrives: role production, kind
from the batch composition, wall_time_ns from wall_time, worker_id, dp_rank
and step_id = counter_id from the message. The timing windows an FPM does
not carry (t_*, narrow and GPU time, payload bytes) are -1.

Idle heartbeats (wall_time 0, nothing scheduled) are counted and skipped.
Holes in the 8-byte sequence numbers and in counter_id (the publisher drops
messages when its queue is full) are counted and their ranges recorded in
the manifest's notes and the summary.

It stops after --duration, after --max-steps steps, or on Ctrl-C / SIGTERM,
and then finishes the dataset cleanly. Rows are made durable every
--checkpoint, so a subscriber killed without warning keeps a partial dataset.

When the publisher goes away (the engine restarts, the connection drops), the
rows so far are made durable at once and the subscriber re-dials: after
--reconnect, then twice as long after each failed attempt, up to
--reconnect-max, until the publisher is back or the capture stops. The log
says when it lost the publisher, when it reconnected, and how many messages
the sequence numbers say were missed meanwhile (a restarted publisher starts
its sequence again: what it sent while away cannot be counted). The summary
and the manifest count the disconnections and reconnections. --reconnect 0
ends the capture cleanly when the publisher goes away.

  # needs: network (a Dynamo vLLM worker publishing at the endpoint)
  steplab capture fpm --endpoint tcp://127.0.0.1:20380 -o datasets/live-fpm --duration 10m
  steplab capture fpm --endpoint tcp://gpu-node-3:20381 -o out/fpm-rank1 --max-steps 100000 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if endpoint == "" {
				return &exitError{code: 2, msg: "capture fpm: no endpoint: use --endpoint tcp://HOST:PORT"}
			}
			if err := refuseExisting("capture fpm", out, force); err != nil {
				return err
			}
			if duration < 0 || maxSteps < 0 {
				return &exitError{code: 2, msg: "capture fpm: --duration and --max-steps must not be negative"}
			}
			if reconnect < 0 || reconnectMax < reconnect {
				return &exitError{code: 2, msg: fmt.Sprintf("capture fpm: --reconnect %s and --reconnect-max %s: want 0 <= --reconnect <= --reconnect-max (e.g. --reconnect 1s --reconnect-max 30s)", reconnect, reconnectMax)}
			}
			parent := cmd.Context()
			if parent == nil {
				parent = context.Background()
			}
			ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
			defer stop()
			slog.Info(fmt.Sprintf("subscribed to %s; writing %s (Ctrl-C stops and finishes the dataset)", endpoint, out))
			res, err := capture.SubscribeFPM(ctx, endpoint, out, capture.FPMOptions{
				Duration: duration, MaxSteps: maxSteps, CheckpointEvery: every, DialTimeout: dialTimeout,
				Overwrite: force, Command: os.Args, Reconnect: reconnect, ReconnectMax: reconnectMax,
				Logf: func(format string, args ...any) { slog.Info(fmt.Sprintf(format, args...)) },
			})
			if err != nil {
				if res != nil {
					return fmt.Errorf("capture fpm: %w (the dataset at %s keeps what was checkpointed and is marked partial)", err, out)
				}
				return fmt.Errorf("capture fpm: %w", err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			printFPMResult(cmd.OutOrStdout(), res)
			return nil
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "ZMQ endpoint of the FPM publisher, tcp://HOST:PORT")
	cmd.Flags().StringVarP(&out, "output", "o", "", "dataset directory to write")
	cmd.Flags().DurationVar(&duration, "duration", 0, "stop after this long (e.g. 30s, 10m; 0: until interrupted)")
	cmd.Flags().Int64Var(&maxSteps, "max-steps", 0, "stop after this many steps (0: no limit)")
	cmd.Flags().DurationVar(&every, "checkpoint", 5*time.Second, "make the rows received durable this often")
	cmd.Flags().DurationVar(&dialTimeout, "dial-timeout", 10*time.Second, "how long to wait for the publisher's port at the start")
	cmd.Flags().DurationVar(&reconnect, "reconnect", time.Second, "first wait before re-dialling a publisher that went away, doubled per failed attempt (0: stop when it goes away)")
	cmd.Flags().DurationVar(&reconnectMax, "reconnect-max", 30*time.Second, "longest wait between re-dial attempts")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing dataset")
	return cmd
}

func printFPMResult(w io.Writer, r *capture.FPMResult) {
	fmt.Fprintf(w, "dataset %s (%s) from %s\n", r.Dataset, r.Status, r.Endpoint)
	fmt.Fprintf(w, "stopped by %s after %.1f s\n", r.StopReason, r.ElapsedS)
	fmt.Fprintf(w, "messages %d: %d steps written, %d idle heartbeats, %d empty, %d malformed\n",
		r.Messages, r.Steps, r.Heartbeats, r.Empty, r.Malformed)
	if r.FirstMalformed != "" {
		fmt.Fprintf(w, "first malformed: %s\n", r.FirstMalformed)
	}
	fmt.Fprintf(w, "gaps: %d in the sequence (%d missing), %d in counter_id (%d missing)\n",
		r.SequenceGaps, r.SequenceMissing, r.CounterGaps, r.CounterMissing)
	for i, g := range r.Gaps {
		if i == 10 {
			fmt.Fprintf(w, "  ... %d more (see --json)\n", len(r.Gaps)-10)
			break
		}
		fmt.Fprintf(w, "  %s\n", g)
	}
	if r.Restarts > 0 {
		fmt.Fprintf(w, "restarts: %d (sequence or counter_id went backwards)\n", r.Restarts)
	}
	if r.Disconnects > 0 {
		fmt.Fprintf(w, "publisher lost %d times, reconnected %d times (rows made durable at each loss)\n", r.Disconnects, r.Reconnects)
	}
	if len(r.Workers) > 0 {
		fmt.Fprintf(w, "workers: %v\n", r.Workers)
	}
}
