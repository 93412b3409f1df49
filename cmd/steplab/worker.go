package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

	"github.com/steplab/steplab/sweep"
	"github.com/steplab/steplab/sweep/dist"
)

func init() { register(newWorkerCmd) }

// queueFlags are the connection flags of worker and sweep --queue: the
// server and NATS's own means of identity (no secret is an argument).
type queueFlags struct {
	url  string
	auth dist.Auth
}

func (q *queueFlags) flags(f *pflag.FlagSet, usage string) {
	f.StringVar(&q.url, "queue", "", usage)
	f.StringVar(&q.auth.Creds, "creds", "", "NATS credentials file (user JWT and nkey seed)")
	f.StringVar(&q.auth.NkeySeed, "nkey", "", "file holding a NATS user nkey seed")
	f.StringVar(&q.auth.User, "user", "", "NATS user (default $"+dist.EnvUser+"); the password from --password-file or $"+dist.EnvPassword)
	f.StringVar(&q.auth.PasswordFile, "password-file", "", "file holding the NATS user's password (one line)")
	f.StringVar(&q.auth.TLSCA, "tls-ca", "", "CA certificate(s) that verify the NATS server (PEM)")
	f.StringVar(&q.auth.TLSCert, "tls-cert", "", "client certificate for a server that verifies clients (PEM, with --tls-key)")
	f.StringVar(&q.auth.TLSKey, "tls-key", "", "the client certificate's key (PEM)")
}

// connect connects to the queue and opens JetStream; a bad address or
// identity flag exits 2.
func (q *queueFlags) connect(name string) (*nats.Conn, jetstream.JetStream, error) {
	if _, err := q.auth.WithEnv().Options(); err != nil {
		return nil, nil, &exitError{code: 2, msg: err.Error()}
	}
	nc, err := dist.Connect(q.url, name, q.auth)
	if errors.Is(err, dist.ErrBadURL) {
		return nil, nil, &exitError{code: 2, msg: err.Error()}
	}
	if err != nil {
		return nil, nil, &exitError{code: 1, msg: err.Error()}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// limitFlags bound each point's work.
type limitFlags struct {
	requests  int
	steps     int64
	wall      time.Duration
	memoryMiB int64
}

func (l *limitFlags) flags(f *pflag.FlagSet, whose string) {
	f.IntVar(&l.requests, "limit-requests", 0, whose+": refuse a point that simulates more requests than this (0: no limit)")
	f.Int64Var(&l.steps, "limit-steps", 0, whose+": fail a simulate or what-if point whose engines run more steps than this (0: no limit)")
	f.DurationVar(&l.wall, "limit-wall", 0, whose+": fail a point that runs longer than this (0: no limit)")
	f.Int64Var(&l.memoryMiB, "limit-memory-mib", 0, whose+": the worker's Go memory limit while a point runs, failing it past this (0: no limit)")
}

func (l *limitFlags) limits() (dist.Limits, error) {
	if l.requests < 0 || l.steps < 0 || l.wall < 0 || l.memoryMiB < 0 {
		return dist.Limits{}, &exitError{code: 2, msg: "--limit-requests, --limit-steps, --limit-wall and --limit-memory-mib must not be negative"}
	}
	return dist.Limits{MaxRequests: l.requests, MaxSteps: l.steps, WallTimeNs: int64(l.wall), MemoryBytes: l.memoryMiB << 20}, nil
}

func newWorkerCmd() *cobra.Command {
	var queue queueFlags
	var lim limitFlags
	var results, name string
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
the same machine, or a shared file system. The worker takes only the tasks of
sweeps for that directory (its store id, .steplab-store in it), refuses tasks
that are unsigned, forged or another sweep's (terminated, one log line each)
and says so when it sees a sweep submitted for another directory.

Identity is NATS's own: --creds FILE, --nkey FILE, or --user with the password
from --password-file or $STEPLAB_NATS_PASSWORD (never an argument); TLS with
--tls-ca, --tls-cert and --tls-key. --limit-requests, --limit-steps,
--limit-wall and --limit-memory-mib cap every point's work (a breach fails
the point at once).

Run as many workers as you like, on as many machines; stop one with Ctrl-C
or SIGTERM: it hands its task in flight back, redelivered at once, and exits
130.

Examples:
  # needs: network (a NATS server with JetStream, and the sweep's results directory)
  steplab worker --queue nats://127.0.0.1:4222 --user steplab-worker --password-file out/nats-auth/worker --results out/parts
  steplab worker --queue tls://nats.example:4222 --tls-ca ca.pem --nkey worker.nk --results /shared/parts \
      --jobs 8 --max-idle 5m --limit-wall 30m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if queue.url == "" || results == "" {
				return &exitError{code: 2, msg: "worker: give --queue nats://HOST:PORT and --results DIR"}
			}
			if name == "" {
				h, _ := os.Hostname()
				name = fmt.Sprintf("%s:%d", h, os.Getpid())
			}
			limits, err := lim.limits()
			if err != nil {
				return err
			}
			nc, js, err := queue.connect("steplab worker " + name)
			if err != nil {
				return err
			}
			defer nc.Close()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			w := cmd.OutOrStdout()
			opts := dist.WorkerOptions{Results: results, Jobs: jobs, Name: name, MaxIdle: maxIdle, WaitQueue: waitQueue,
				Limits: limits, Log: slog.Default()}
			if asJSON {
				enc := json.NewEncoder(w)
				opts.OnTask = func(e dist.TaskEvent) { _ = enc.Encode(e) }
				opts.Log = slog.New(slog.DiscardHandler)
			}
			stats, err := dist.RunWorker(ctx, js, opts)
			if !asJSON {
				fmt.Fprintf(w, "worker %s: %d done, %d retried, %d dead-lettered, %d refused, %d abandoned\n", name, stats.Done,
					stats.Retried, stats.Dead, stats.Refused, stats.Abandoned)
			}
			if err == nil && ctx.Err() != nil {
				// The naks go out before the connection closes.
				_ = nc.Flush()
				return &exitError{code: 130, msg: fmt.Sprintf("worker %s interrupted: %d task(s) in flight handed back for redelivery", name, stats.Abandoned)}
			}
			return err
		},
	}
	f := cmd.Flags()
	queue.flags(f, "NATS server with JetStream: nats://HOST:PORT or tls://HOST:PORT")
	lim.flags(f, "this worker's cap")
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
	queue                         queueFlags
	lim                           limitFlags
	results, emit, merge, sweepID string
	point                         int
	timeout, ackWait              time.Duration
	maxDeliver                    int
	resume                        bool
	parallelism                   int
	image, pvc, namespace         string
	dataPVC, pathsFrom            string
	natsSecret, workerAuth        string
	workerUser                    string
}

func (d *sweepDist) flags(f *pflag.FlagSet) {
	d.queue.flags(f, "distribute the points over a NATS JetStream work queue: nats://HOST:PORT or tls://HOST:PORT (run steplab worker)")
	d.lim.flags(f, "with --queue")
	f.StringVar(&d.results, "results", "", "with --queue: directory the workers write parts to (default OUT/parts); with --point: where the part goes")
	f.DurationVar(&d.timeout, "timeout", time.Hour, "with --queue or --merge: give up waiting for the points after this long")
	f.DurationVar(&d.ackWait, "ack-wait", dist.DefaultAckWait, "with --queue: redeliver a task whose worker went silent this long")
	f.IntVar(&d.maxDeliver, "max-deliver", dist.DefaultMaxDeliver, "with --queue: deliveries of a point before it is dead-lettered")
	f.BoolVar(&d.resume, "resume", false, "with --queue: keep the parts of an earlier submission of the same sweep, run only the rest")
	f.StringVar(&d.sweepID, "sweep-id", "", "name the sweep's tasks and parts (default: a hash of scenario, --set and --vary)")
	f.StringVar(&d.emit, "emit", "", "print a manifest instead of running: k8s-indexed-job (one pod per point) or k8s-workers (a pool of steplab worker pods)")
	f.IntVar(&d.point, "point", -1, "run only point N of the grid and write its part into --results (a pod of an Indexed Job)")
	f.StringVar(&d.merge, "merge", "", "merge the parts in DIR into -o OUT (the Indexed Job's last step; waits up to --timeout)")
	f.IntVar(&d.parallelism, "parallelism", 4, "with --emit: pods at once")
	f.StringVar(&d.image, "image", "steplab:latest", "with --emit: container image with steplab")
	f.StringVar(&d.pvc, "pvc", "steplab-results", "with --emit: ReadWriteMany claim for /results")
	f.StringVar(&d.namespace, "namespace", "", "with --emit: namespace of the objects")
	f.StringVar(&d.dataPVC, "data-pvc", "", "with --emit k8s-indexed-job: claim holding a copy of the current directory (the files the scenario names: a calibration's datasets), mounted at /data")
	f.StringVar(&d.pathsFrom, "paths-from", "", "with --point: resolve the scenario's relative paths against DIR, not the scenario's directory")
	f.StringVar(&d.natsSecret, "nats-secret", "steplab-nats", "with --emit k8s-workers: Secret holding the workers' NATS identity")
	f.StringVar(&d.workerAuth, "worker-auth", "creds", "with --emit k8s-workers: the Secret's identity: creds (key nats.creds), nkey (user.nk) or password (password)")
	f.StringVar(&d.workerUser, "worker-user", "steplab-worker", "with --emit k8s-workers --worker-auth password: the workers' NATS user")
}

func (d *sweepDist) active() bool {
	return d.queue.url != "" || d.emit != "" || d.merge != "" || d.point >= 0
}

func (d *sweepDist) run(cmd *cobra.Command, args, sets, varies []string, out string, force, asJSON bool) error {
	w := cmd.OutOrStdout()
	if d.sweepID != "" {
		if err := dist.CheckID(d.sweepID); err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
	}
	if d.merge != "" {
		return d.runMerge(cmd, args, out, force)
	}
	if d.emit == "k8s-workers" {
		return d.emitWorkers(cmd, args)
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
	spec := dist.SpecFromFile(args[0], b, sets, vs)
	if d.pathsFrom != "" {
		// The scenario's bytes from args[0], its relative paths from there.
		abs, err := filepath.Abs(d.pathsFrom)
		if err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
		spec.Path = filepath.Join(abs, filepath.Base(args[0]))
	}
	pts, err := spec.Points()
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	switch {
	case d.emit != "":
		if d.emit != "k8s-indexed-job" {
			return &exitError{code: 2, msg: fmt.Sprintf("--emit %q: the manifests are k8s-indexed-job and k8s-workers", d.emit)}
		}
		if err := dist.EmitIndexedJob(w, spec, len(pts), d.sweepID, dist.K8sOptions{Image: d.image,
			Parallelism: d.parallelism, PVC: d.pvc, Namespace: d.namespace, DataPVC: d.dataPVC, DataRoot: "."}); err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
		return nil
	case d.point >= 0:
		if d.results == "" {
			return &exitError{code: 2, msg: "sweep --point N: give --results DIR"}
		}
		p, err := dist.RunPoint(spec, d.sweepID, d.point, d.results)
		if err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
		fmt.Fprintf(w, "wrote %s\n", p)
		return nil
	}
	res, err := d.runQueue(cmd, spec, len(pts), out, force, asJSON)
	if err == nil && !asJSON {
		fmt.Fprintf(w, "wrote %s (%s)\n", out, sweepFiles(res.Kind))
	}
	return err

}

// runQueue submits the sweep to the work queue, follows it and writes the
// merged sweep, which it returns.
func (d *sweepDist) runQueue(cmd *cobra.Command, spec dist.Spec, points int, out string, force, asJSON bool) (*sweep.Result, error) {
	w := cmd.OutOrStdout()
	// --queue; --resume goes on in the output of an earlier submission.
	if !d.resume || out == "" {
		if err := refuseExistingDir("sweep", out, force, sweep.JSONFile); err != nil {
			return nil, err
		}
	}
	if d.results == "" {
		d.results = filepath.Join(out, "parts")
	}
	limits, err := d.lim.limits()
	if err != nil {
		return nil, err
	}
	nc, js, err := d.queue.connect("steplab sweep")
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := dist.SubmitOptions{SweepID: d.sweepID, Results: d.results, Timeout: d.timeout, Resume: d.resume, Limits: limits,
		Queue: dist.QueueConfig{AckWait: d.ackWait, MaxDeliver: d.maxDeliver}}
	var finish func()
	if asJSON {
		enc := json.NewEncoder(w)
		opts.Events = func(e dist.Event) { _ = enc.Encode(e) }
		finish = func() {}
	} else {
		bar := newProgress(cmd, int64(points), "sweep points (queue)")
		opts.Events = func(e dist.Event) {
			bar.Set(e.Done + e.Dead)
			if e.Event == "submitted" {
				slog.Info("submitted the sweep", "sweep", e.SweepID, "points", e.Total, "queue", d.queue.url, "parts", d.results)
			}
			if e.Event == "pending" && e.Index != nil {
				slog.Info("waiting", "pending", e.Error, "longest held", e.TaskID, "by", e.Worker, "since", e.Since)
			}
			if e.Event == "refused" {
				slog.Warn("a part not run from its point's inputs, ignored", "task", e.TaskID, "err", e.Error)
			}
		}
		finish = func() { bar.Finish() }
	}
	res, o, err := dist.Run(ctx, js, spec, opts)
	finish()
	if res != nil {
		if werr := sweep.Write(out, res); werr != nil {
			return nil, werr
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
		return nil, &exitError{code: 1, msg: err.Error()}
	}
	if !asJSON {
		fmt.Fprintf(w, "sweep %s: %d points in %.1f s over %s\n", o.SweepID, o.Total, o.Elapsed.Seconds(), d.queue.url)
	}
	return res, nil
}

func printDead(w io.Writer, dead []dist.DeadLetter) {
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

// runMerge merges the parts of a directory (the Indexed Job's last step).
func (d *sweepDist) runMerge(cmd *cobra.Command, args []string, out string, force bool) error {
	w := cmd.OutOrStdout()
	if len(args) != 0 {
		return &exitError{code: 2, msg: "sweep --merge DIR -o OUT takes no scenario"}
	}
	if err := refuseExistingDir("sweep", out, force, sweep.JSONFile); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), max(d.timeout, time.Millisecond))
	defer cancel()
	m, err := dist.WaitParts(ctx, d.merge, d.sweepID, time.Second)
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

// emitWorkers prints a Job of worker pods whose NATS identity is a Secret.
func (d *sweepDist) emitWorkers(cmd *cobra.Command, args []string) error {
	if len(args) != 0 {
		return &exitError{code: 2, msg: "sweep --emit k8s-workers takes no scenario (the workers take any sweep of their results store)"}
	}
	limits, err := d.lim.limits()
	if err != nil {
		return err
	}
	err = dist.EmitWorkerJob(cmd.OutOrStdout(), dist.WorkerJobOptions{Queue: d.queue.url, Image: d.image, Namespace: d.namespace,
		Workers: d.parallelism, PVC: d.pvc, Secret: d.natsSecret, Auth: d.workerAuth, User: d.workerUser,
		TLSCA: d.queue.auth.TLSCA != "", TLSClient: d.queue.auth.TLSCert != "", Limits: limits})
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	return nil
}
