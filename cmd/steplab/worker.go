package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/steplab/steplab/replay/distsweep"
	"github.com/steplab/steplab/replay/sweep"
)

func init() { register(newWorkerCmd) }

// connectQueue connects to nats://HOST:PORT and opens JetStream.
func connectQueue(raw, name string) (*nats.Conn, jetstream.JetStream, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Host == "" {
		return nil, nil, &exitError{code: 2, msg: fmt.Sprintf("--queue %q: want nats://HOST:PORT", raw)}
	}
	nc, err := nats.Connect(raw, nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(time.Second))
	if err != nil {
		return nil, nil, fmt.Errorf("--queue %s: %w", raw, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

func newWorkerCmd() *cobra.Command {
	var queue, results, name string
	var jobs int
	var maxIdle, waitQueue time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:         "worker --queue nats://HOST:PORT --results DIR",
		Annotations: map[string]string{stopsOnCancel: ""},
		Short:       "Run sweep points from a NATS JetStream work queue",
		Long: `worker pulls the points of distributed sweeps (steplab sweep --queue) from
the NATS JetStream work queue, simulates each with the same code as a local
sweep, writes its Parquet part into DIR (<sweep id>-<index>.parquet: written
under a temporary name, fsynced, renamed) and acknowledges the task only once
the part is durable. While a point runs it sends in-progress heartbeats, so a
long point is not redelivered; if the worker dies, its task goes to another
worker after the ack wait. A point that fails is retried (up to the sweep's
--max-deliver) and then recorded, with its error, in the STEPLAB_DEAD bucket.

DIR must be the directory the submitting steplab sweep reads (--results):
the same machine, or a shared file system.

Run as many workers as you like, on as many machines; stop one with Ctrl-C
(its task in flight is redelivered).

Examples:
  # needs: network (a NATS server with JetStream, and the sweep's results directory)
  steplab worker --queue nats://127.0.0.1:4222 --results /shared/sweep-parts
  steplab worker --queue nats://nats.example:4222 --results /shared/parts --jobs 8 --max-idle 5m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if queue == "" || results == "" {
				return &exitError{code: 2, msg: "worker: give --queue nats://HOST:PORT and --results DIR"}
			}
			if name == "" {
				h, _ := os.Hostname()
				name = fmt.Sprintf("%s:%d", h, os.Getpid())
			}
			nc, js, err := connectQueue(queue, "steplab worker "+name)
			if err != nil {
				return err
			}
			defer nc.Close()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			w := cmd.OutOrStdout()
			opts := distsweep.WorkerOptions{Results: results, Jobs: jobs, Name: name, MaxIdle: maxIdle, WaitQueue: waitQueue,
				Log: slog.Default()}
			if asJSON {
				enc := json.NewEncoder(w)
				opts.OnTask = func(e distsweep.TaskEvent) { _ = enc.Encode(e) }
				opts.Log = slog.New(slog.DiscardHandler)
			}
			stats, err := distsweep.RunWorker(ctx, js, opts)
			if !asJSON {
				fmt.Fprintf(w, "worker %s: %d done, %d retried, %d dead-lettered, %d abandoned\n", name, stats.Done, stats.Retried,
					stats.Dead, stats.Abandoned)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&queue, "queue", "", "NATS server with JetStream: nats://HOST:PORT")
	f.StringVar(&results, "results", "", "directory the parts are written to (shared with the submitter)")
	f.IntVar(&jobs, "jobs", 1, "points run at once")
	f.StringVar(&name, "name", "", "worker name in dead letters (default host:pid)")
	f.DurationVar(&maxIdle, "max-idle", 0, "exit after this long without a task (0: run until stopped)")
	f.DurationVar(&waitQueue, "wait-queue", 0, "give up if no sweep queue exists after this long (0: wait)")
	f.BoolVar(&asJSON, "json", false, "print one JSON line per task attempt")
	return cmd
}

// sweepDist holds the distributed modes of steplab sweep.
type sweepDist struct {
	queue, results, emit, merge, sweepID string
	point                                int
	timeout, ackWait                     time.Duration
	maxDeliver                           int
	resume                               bool
	parallelism                          int
	image, pvc, namespace                string
}

func (d *sweepDist) flags(f *pflag.FlagSet) {
	f.StringVar(&d.queue, "queue", "", "distribute the points over a NATS JetStream work queue: nats://HOST:PORT (run steplab worker)")
	f.StringVar(&d.results, "results", "", "with --queue: directory the workers write parts to (default OUT/parts); with --point: where the part goes")
	f.DurationVar(&d.timeout, "timeout", time.Hour, "with --queue or --merge: give up waiting for the points after this long")
	f.DurationVar(&d.ackWait, "ack-wait", distsweep.DefaultAckWait, "with --queue: redeliver a task whose worker went silent this long")
	f.IntVar(&d.maxDeliver, "max-deliver", distsweep.DefaultMaxDeliver, "with --queue: deliveries of a point before it is dead-lettered")
	f.BoolVar(&d.resume, "resume", false, "with --queue: keep the parts of an earlier submission of the same sweep, run only the rest")
	f.StringVar(&d.sweepID, "sweep-id", "", "name the sweep's tasks and parts (default: a hash of scenario, --set and --vary)")
	f.StringVar(&d.emit, "emit", "", "print a manifest instead of running: k8s-indexed-job")
	f.IntVar(&d.point, "point", -1, "run only point N of the grid and write its part into --results (a pod of an Indexed Job)")
	f.StringVar(&d.merge, "merge", "", "merge the parts in DIR into -o OUT (the Indexed Job's last step; waits up to --timeout)")
	f.IntVar(&d.parallelism, "parallelism", 4, "with --emit: pods at once")
	f.StringVar(&d.image, "image", "steplab:latest", "with --emit: container image with steplab")
	f.StringVar(&d.pvc, "pvc", "steplab-results", "with --emit: ReadWriteMany claim for /results")
	f.StringVar(&d.namespace, "namespace", "", "with --emit: namespace of the objects")
}

func (d *sweepDist) active() bool {
	return d.queue != "" || d.emit != "" || d.merge != "" || d.point >= 0
}

func (d *sweepDist) run(cmd *cobra.Command, args, sets, varies []string, out string, force, asJSON bool) error {
	w := cmd.OutOrStdout()
	if d.sweepID != "" {
		if err := distsweep.CheckID(d.sweepID); err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
	}
	if d.merge != "" {
		if len(args) != 0 {
			return &exitError{code: 2, msg: "sweep --merge DIR -o OUT takes no scenario"}
		}
		if err := refuseExistingDir("sweep", out, force, sweep.JSONFile); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), max(d.timeout, time.Millisecond))
		defer cancel()
		m, err := distsweep.WaitParts(ctx, d.merge, d.sweepID, time.Second)
		if err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
		if len(m.Missing) > 0 {
			return &exitError{code: 1, msg: fmt.Sprintf("sweep %s: %d of %d points have no part in %s: %s", m.SweepID, len(m.Missing),
				m.Total, d.merge, ints(m.Missing))}
		}
		if err := sweep.Write(out, m.Result); err != nil {
			return err
		}
		fmt.Fprintf(w, "merged %d parts of sweep %s into %s (sweep.parquet, sweep.json, figures)\n", m.Total, m.SweepID, out)
		return nil
	}
	if len(args) != 1 {
		return &exitError{code: 2, msg: "sweep: give the scenario file"}
	}
	vs, err := parseVaries(varies)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	spec := distsweep.SpecFromFile(args[0], b, sets, vs)
	pts, err := spec.Points()
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	switch {
	case d.emit != "":
		if d.emit != "k8s-indexed-job" {
			return &exitError{code: 2, msg: fmt.Sprintf("--emit %q: the one manifest is k8s-indexed-job", d.emit)}
		}
		return distsweep.EmitIndexedJob(w, spec, len(pts), d.sweepID, distsweep.K8sOptions{Image: d.image,
			Parallelism: d.parallelism, PVC: d.pvc, Namespace: d.namespace})
	case d.point >= 0:
		if d.results == "" {
			return &exitError{code: 2, msg: "sweep --point N: give --results DIR"}
		}
		p, err := distsweep.RunPoint(spec, d.sweepID, d.point, d.results)
		if err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
		fmt.Fprintf(w, "wrote %s\n", p)
		return nil
	}
	// --queue; --resume goes on in the output of an earlier submission.
	if !d.resume || out == "" {
		if err := refuseExistingDir("sweep", out, force, sweep.JSONFile); err != nil {
			return err
		}
	}
	if d.results == "" {
		d.results = filepath.Join(out, "parts")
	}
	nc, js, err := connectQueue(d.queue, "steplab sweep")
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := distsweep.SubmitOptions{SweepID: d.sweepID, Results: d.results, Timeout: d.timeout, Resume: d.resume,
		Queue: distsweep.QueueConfig{AckWait: d.ackWait, MaxDeliver: d.maxDeliver}}
	var finish func()
	if asJSON {
		enc := json.NewEncoder(w)
		opts.Events = func(e distsweep.Event) { _ = enc.Encode(e) }
		finish = func() {}
	} else {
		bar := newProgress(cmd, int64(len(pts)), "sweep points (queue)")
		opts.Events = func(e distsweep.Event) {
			bar.Set(e.Done + e.Dead)
			if e.Event == "submitted" {
				slog.Info("submitted the sweep", "sweep", e.SweepID, "points", e.Total, "queue", d.queue, "parts", d.results)
			}
		}
		finish = func() { bar.Finish() }
	}
	res, o, err := distsweep.Run(ctx, js, spec, opts)
	finish()
	if res != nil {
		if werr := sweep.Write(out, res); werr != nil {
			return werr
		}
	}
	if o != nil && len(o.Dead) > 0 {
		b, _ := json.MarshalIndent(o.Dead, "", "  ")
		_ = os.WriteFile(filepath.Join(out, "dead_letters.json"), append(b, '\n'), 0o644)
	}
	if err != nil {
		if o != nil && len(o.Dead) > 0 {
			printDead(cmd.ErrOrStderr(), o.Dead)
		}
		return &exitError{code: 1, msg: err.Error()}
	}
	if !asJSON {
		fmt.Fprintf(w, "sweep %s: %d points in %.1f s over %s\nwrote %s (sweep.parquet, sweep.json, throughput.png/.svg, latency_p90.png/.svg)\n",
			o.SweepID, o.Total, o.Elapsed.Seconds(), d.queue, out)
	}
	return nil
}

func printDead(w io.Writer, dead []distsweep.DeadLetter) {
	fmt.Fprintf(w, "dead-lettered points (each failed every delivery; the table lacks them):\n")
	for _, d := range dead {
		fmt.Fprintf(w, "  %s  point %d (%s) after %d attempts: %s\n", d.TaskID, d.Index, strings.Join(d.Values, ", "), d.Attempts, d.Error)
	}
}

func ints(xs []int) string {
	var s []string
	for i, x := range xs {
		if i == 20 {
			s = append(s, fmt.Sprintf("... (%d more)", len(xs)-20))
			break
		}
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, ", ")
}
