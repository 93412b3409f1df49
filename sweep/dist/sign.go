package dist

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// SigHeader is the task message header holding the submitter's ed25519
// signature of the message data (base64).
const SigHeader = "Steplab-Signature"

// SweepMeta is a submission, stored in SweepsBucket under its sweep id
// before its tasks are published: a worker takes a task only if the
// sweep's meta names the worker's results store, the task's run, and its
// public key verifies the task's signature.
type SweepMeta struct {
	V       int    `json:"v"`
	SweepID string `json:"sweep_id"`
	Run     string `json:"run"`
	Store   string `json:"store"`
	Total   int    `json:"total"`
	// PublicKey is the submission's ed25519 key (generated at submit; the
	// private half never leaves the submitter).
	PublicKey []byte `json:"public_key"`
	Time      string `json:"time"`
}

// signer signs a submission's tasks.
type signer struct{ key ed25519.PrivateKey }

func (s signer) msg(subject string, data []byte) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = data
	m.Header.Set(SigHeader, base64.StdEncoding.EncodeToString(ed25519.Sign(s.key, data)))
	return m
}

// refusal is a task a worker will not run (terminated, never retried).
type refusal struct{ reason string }

func (r *refusal) Error() string { return r.reason }

func refuse(format string, a ...any) error { return &refusal{fmt.Sprintf(format, a...)} }

// parseSubject splits steplab.sweep.tasks.<store>.<sweep id>.
func parseSubject(s string) (store, sweepID string, ok bool) {
	rest, found := strings.CutPrefix(s, SubjectPrefix)
	if !found {
		return "", "", false
	}
	store, sweepID, found = strings.Cut(rest, ".")
	return store, sweepID, found && storeRE.MatchString(store) && CheckID(sweepID) == nil
}

// verify reads a delivered task and checks it was signed by its sweep's
// submitter for this worker's store. A refusal says why; another error is
// transient (the meta could not be read).
func (q *queue) verify(ctx context.Context, msg jetstream.Msg) (*Task, error) {
	store, id, ok := parseSubject(msg.Subject())
	if !ok {
		return nil, refuse("subject %q is not %s<store>.<sweep id>", msg.Subject(), SubjectPrefix)
	}
	if store != q.store {
		return nil, refuse("a task for results store %s; this worker writes to store %s", store, q.store)
	}
	sig64 := ""
	if h := msg.Headers(); h != nil {
		sig64 = h.Get(SigHeader)
	}
	if sig64 == "" {
		return nil, refuse("unsigned task on %s (no %s header)", msg.Subject(), SigHeader)
	}
	sig, err := base64.StdEncoding.DecodeString(sig64)
	if err != nil {
		return nil, refuse("task on %s: its %s header is not base64", msg.Subject(), SigHeader)
	}
	meta, err := q.meta(ctx, id)
	if err != nil {
		return nil, err
	}
	if meta.Store != q.store {
		return nil, refuse("sweep %s writes to results store %s, not this worker's %s", id, meta.Store, q.store)
	}
	if len(meta.PublicKey) != ed25519.PublicKeySize || !ed25519.Verify(meta.PublicKey, msg.Data(), sig) {
		return nil, refuse("task on %s: its signature does not verify with sweep %s's key (forged or altered)", msg.Subject(), id)
	}
	var t Task
	if err := json.Unmarshal(msg.Data(), &t); err != nil {
		return nil, refuse("signed message on %s is not a steplab task", msg.Subject())
	}
	if t.SweepID != id || t.Run != meta.Run {
		return nil, refuse("task of sweep %s (submission %s) on the subject of sweep %s (submission %s)", t.SweepID, t.Run, id, meta.Run)
	}
	if err := t.Check(); err != nil {
		return nil, refuse("%v", err)
	}
	return &t, nil
}

// meta reads sweep id's SweepMeta.
func (q *queue) meta(ctx context.Context, id string) (*SweepMeta, error) {
	e, err := q.sweeps.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, refuse("no sweep %s in %s: nobody submitted it", id, SweepsBucket)
	}
	if err != nil {
		return nil, fmt.Errorf("reading sweep %s from %s: %w", id, SweepsBucket, err)
	}
	var m SweepMeta
	if err := json.Unmarshal(e.Value(), &m); err != nil || m.SweepID != id {
		return nil, refuse("%s: the entry of sweep %s is not a sweep", SweepsBucket, id)
	}
	return &m, nil
}

// putMeta records a submission before its tasks are published.
func (q *queue) putMeta(ctx context.Context, m SweepMeta) error {
	m.V, m.Time = ProtocolVersion, time.Now().UTC().Format(time.RFC3339Nano)
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if _, err := q.sweeps.Put(ctx, m.SweepID, b); err != nil {
		return fmt.Errorf("recording sweep %s in %s: %w", m.SweepID, SweepsBucket, err)
	}
	return nil
}
