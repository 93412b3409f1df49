package dist

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Names on the JetStream server. A results store (StoreID) has its own
// subjects and consumer, so pools writing to different directories never
// take each other's tasks.
const (
	StreamName     = "STEPLAB_SWEEP"
	SubjectPrefix  = "steplab.sweep.tasks."
	ConsumerPrefix = "steplab-workers-"
	DeadBucket     = "STEPLAB_DEAD"
	// SweepsBucket holds each sweep's SweepMeta (its public key): only
	// the submitters may write it (see examples/nats/steplab.conf).
	SweepsBucket = "STEPLAB_SWEEPS"
	// HeldBucket records which worker holds a point, and since when.
	HeldBucket = "STEPLAB_HELD"
)

// Defaults of QueueConfig.
const (
	DefaultAckWait    = 30 * time.Second
	DefaultMaxDeliver = 3
)

// QueueConfig is the consumer's redelivery policy.
type QueueConfig struct {
	// AckWait: a delivered task not acknowledged (nor heartbeated) for
	// this long is redelivered.
	AckWait time.Duration
	// MaxDeliver bounds the deliveries of a task; a task failing all of
	// them is dead-lettered.
	MaxDeliver int
}

func (c QueueConfig) withDefaults() QueueConfig {
	if c.AckWait <= 0 {
		c.AckWait = DefaultAckWait
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = DefaultMaxDeliver
	}
	return c
}

// Subject is the subject of sweep id's tasks for results store store.
func Subject(store, sweepID string) string { return SubjectPrefix + store + "." + sweepID }

// ConsumerName is the durable consumer of a results store's workers.
func ConsumerName(store string) string { return ConsumerPrefix + store }

// DeadKey is the dead-letter (and held) key of a point.
func DeadKey(sweepID string, index int) string { return fmt.Sprintf("%s.%06d", sweepID, index) }

// queue is the server-side objects a submitter or a worker uses.
type queue struct {
	stream             jetstream.Stream
	consumer           jetstream.Consumer
	dead, sweeps, held jetstream.KeyValue
	store              string
}

// Ensure creates or updates the work-queue stream, the store's durable
// pull consumer (explicit ack, cfg's AckWait and MaxDeliver) and the
// buckets. The submitter calls it; workers wait for them (openQueue).
func Ensure(ctx context.Context, js jetstream.JetStream, store string, cfg QueueConfig) (*queue, error) {
	cfg = cfg.withDefaults()
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        StreamName,
		Description: "steplab sweep points (work queue: a task is removed once a worker acknowledges it)",
		Subjects:    []string{SubjectPrefix + ">"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Discard:     jetstream.DiscardNew,
		Duplicates:  2 * time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", StreamName, err)
	}
	c, err := js.CreateOrUpdateConsumer(ctx, StreamName, jetstream.ConsumerConfig{
		Durable:       ConsumerName(store),
		Description:   "steplab workers of results store " + store,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    cfg.MaxDeliver,
		FilterSubject: SubjectPrefix + store + ".>",
		MaxAckPending: 10000,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", ConsumerName(store), err)
	}
	q := &queue{stream: st, consumer: c, store: store}
	for _, b := range []struct {
		kv   *jetstream.KeyValue
		name string
		desc string
		age  time.Duration
	}{
		{&q.dead, DeadBucket, "steplab sweep tasks that failed every delivery, with their error", 0},
		{&q.sweeps, SweepsBucket, "steplab sweeps: each submission's results store and task-signing public key", 0},
		{&q.held, HeldBucket, "steplab sweep points in progress: the worker holding each and since when", 7 * 24 * time.Hour},
	} {
		kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: b.name, Description: b.desc, History: 1,
			Storage: jetstream.FileStorage, TTL: b.age})
		if err != nil {
			return nil, fmt.Errorf("bucket %s: %w", b.name, err)
		}
		*b.kv = kv
	}
	return q, nil
}

// errNotYet: the submitter has not created the queue yet.
var errNotYet = errors.New("queue not created yet")

// openQueue binds to what Ensure created, or says errNotYet.
func openQueue(ctx context.Context, js jetstream.JetStream, store string) (*queue, error) {
	q := &queue{store: store}
	var err error
	if q.consumer, err = js.Consumer(ctx, StreamName, ConsumerName(store)); err != nil {
		return nil, notYet(err)
	}
	for _, b := range []struct {
		kv   *jetstream.KeyValue
		name string
	}{{&q.dead, DeadBucket}, {&q.sweeps, SweepsBucket}, {&q.held, HeldBucket}} {
		if *b.kv, err = js.KeyValue(ctx, b.name); err != nil {
			return nil, notYet(err)
		}
	}
	return q, nil
}

func notYet(err error) error {
	if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
		errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, context.DeadlineExceeded) {
		return errNotYet
	}
	return err
}

// DeadLetter is the record of a task that failed every delivery. Its
// Error is a safe message (SafeError): never a file's contents.
type DeadLetter struct {
	SweepID  string   `json:"sweep_id"`
	TaskID   string   `json:"task_id"`
	Run      string   `json:"run"`
	Index    int      `json:"index"`
	Values   []string `json:"values"`
	Attempts int      `json:"attempts"`
	Error    string   `json:"error"`
	Worker   string   `json:"worker,omitempty"`
	Time     string   `json:"time"`
}

func putDead(ctx context.Context, kv jetstream.KeyValue, d DeadLetter) error {
	d.Time = time.Now().UTC().Format(time.RFC3339Nano)
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	_, err = kv.Put(ctx, DeadKey(d.SweepID, d.Index), b)
	return err
}

// Held says which worker holds a point, since when, on which delivery.
type Held struct {
	Worker  string `json:"worker"`
	Since   string `json:"since"`
	Attempt int    `json:"attempt"`
}

// DeadLetters lists the dead letters of sweep id (every submission).
func DeadLetters(ctx context.Context, js jetstream.JetStream, sweepID string) ([]DeadLetter, error) {
	kv, err := js.KeyValue(ctx, DeadBucket)
	if err != nil {
		return nil, err
	}
	lister, err := kv.ListKeysFiltered(ctx, sweepID+".*")
	if err != nil {
		return nil, err
	}
	var out []DeadLetter
	for k := range lister.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue
		}
		var d DeadLetter
		if json.Unmarshal(e.Value(), &d) == nil {
			out = append(out, d)
		}
	}
	return out, nil
}
