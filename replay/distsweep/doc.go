// Package distsweep runs a what-if sweep (package sweep) across processes
// and machines: over a NATS JetStream work queue, or as a Kubernetes
// Indexed Job.
//
// The protocol (version 1):
//
//   - A sweep is a Spec: the scenario's bytes, the --set overrides and the
//     --vary keys with all their values. Its id defaults to a hash of the
//     spec, so the same sweep has the same id on every machine.
//   - Each point is a Task (JSON) published on the subject
//     steplab.sweep.tasks.<sweep id> of the stream STEPLAB_SWEEP (work-queue
//     retention, file storage), with the message id <task id>.<run>: the
//     task id is <sweep id>-<point index, 6 digits>; run is a random nonce of
//     one submission. A task carries the spec, the point's values and its
//     seed (the one the local sweep derives, rng.DeriveN of the scenario
//     seed), so a worker needs nothing but the message.
//   - Workers pull from one durable consumer (steplab-workers, explicit
//     ack, AckWait and MaxDeliver set by the submitter), run the point with
//     the local sweep's code (sweep.RunPoint), write the part
//     <task id>.parquet into the results directory (temporary name, fsync,
//     rename, fsync of the directory) and only then acknowledge (a double
//     ack, confirmed by the server). While a point runs the worker sends
//     in-progress heartbeats every AckWait/3, so a long point is not
//     redelivered; a worker that dies stops them, and its task is
//     redelivered after AckWait.
//   - A part is the sweep table's rows for that point (the same columns as
//     sweep.parquet) with the point's full audit in the Parquet footer's
//     key-value metadata (key steplab.sweep.part). A redelivered task
//     rewrites its own part under the same name: at most one part per
//     point, so rows are never duplicated.
//   - A failed attempt is negatively acknowledged with a delay; the worker
//     that fails the last allowed delivery (MaxDeliver) writes a dead letter
//     into the KV bucket STEPLAB_DEAD under <sweep id>.<index> (the error,
//     the attempts, the worker) and terminates the message. A task whose
//     every holder died before acknowledging is dead-lettered by the
//     submitter when the server's MAX_DELIVERIES advisory names it.
//   - The submitter follows progress (parts appearing in the results
//     directory, dead letters in the bucket), finishes when every point has
//     a part or a dead letter (or at its timeout), purges what is left of
//     its subject, and merges the parts in point order with sweep.Write:
//     sweep.parquet, sweep.json and the figures are byte-identical to a
//     local sweep's.
//
// The Kubernetes path (EmitIndexedJob) runs the same point code in one pod
// per completion index (steplab sweep --point N) and merges with
// steplab sweep --merge DIR.
package distsweep
