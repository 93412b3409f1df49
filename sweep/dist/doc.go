// Package dist runs a what-if sweep (package sweep) across processes
// and machines: over a NATS JetStream work queue, or as a Kubernetes
// Indexed Job.
//
// The protocol (version 3):
//
//   - A sweep is a Spec: the scenario's bytes, the --set overrides and the
//     --vary keys with all their values. Its id defaults to a hash of the
//     spec, so the same sweep has the same id on every machine.
//   - A results directory has a store id (StoreID, the file .steplab-store).
//     Each point is a Task (JSON) published on the subject
//     steplab.sweep.tasks.<store id>.<sweep id> of the stream STEPLAB_SWEEP
//     (work-queue retention, file storage), with the message id
//     <task id>.<run>: the task id is <sweep id>-<point index, 6 digits>;
//     run is a random nonce of one submission. A task carries the spec, the
//     point's values, its seed (the one the local sweep derives) and its
//     limits, so a worker needs nothing but the message.
//   - Each submission generates an ed25519 key, records the public half in
//     the KV bucket STEPLAB_SWEEPS under the sweep id (with the run and the
//     store; only submitters may write it) and signs every task (header
//     Steplab-Signature). A worker refuses, terminating it, a task that is
//     unsigned, does not verify with its sweep's key, belongs to another
//     run, sweep or store, or whose id, index or values are out of bounds.
//   - Workers pull from their store's durable consumer
//     (steplab-workers-<store id>, explicit ack, AckWait and MaxDeliver set
//     by the submitter), run the point with the local sweep's code
//     (sweep.RunPoint) within its limits, write the part <task id>.parquet
//     into the results directory (temporary name, fsync, rename, fsync of
//     the directory) and only then acknowledge (a double ack, confirmed by
//     the server). While a point runs the worker sends in-progress
//     heartbeats every AckWait/3 and records itself in STEPLAB_HELD; a
//     worker that dies stops them, and its task is redelivered after
//     AckWait.
//   - A part is the sweep table's rows for that point (the same columns as
//     sweep.parquet) with the point's full audit and its task's input
//     digest (Task.Digest) in the Parquet footer's key-value metadata (key
//     steplab.sweep.part). A redelivered task rewrites its own part under
//     the same name: at most one part per point, so rows are never
//     duplicated.
//   - A failed attempt is negatively acknowledged with a delay; the worker
//     that fails the last allowed delivery (MaxDeliver), or a limit, writes
//     a dead letter into the KV bucket STEPLAB_DEAD under <sweep id>.<index>
//     (a safe error: SafeError, never file contents; the attempts; the
//     worker) and terminates the message. A task whose every holder died
//     before acknowledging is dead-lettered by the submitter when the
//     server's MAX_DELIVERIES advisory names it.
//   - The submitter follows progress (parts of its points' digests
//     appearing in the results directory, dead letters, held points),
//     finishes when every point has a part or a dead letter (or at its
//     timeout, naming the holders), purges what is left of its subject, and
//     merges the parts in point order with sweep.Write, refusing a part of
//     other inputs: sweep.parquet, sweep.json and the figures are
//     byte-identical to a local sweep's.
//
// The Kubernetes path (EmitIndexedJob) runs the same point code in one pod
// per completion index (steplab sweep --point N) and merges with
// steplab sweep --merge DIR.
package dist
