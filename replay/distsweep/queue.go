package distsweep

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Names on the JetStream server.
const (
	StreamName    = "STEPLAB_SWEEP"
	SubjectPrefix = "steplab.sweep.tasks."
	ConsumerName  = "steplab-workers"
	DeadBucket    = "STEPLAB_DEAD"
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

// Subject is the subject of sweep id's tasks.
func Subject(sweepID string) string { return SubjectPrefix + sweepID }

// DeadKey is the dead-letter key of a point.
func DeadKey(sweepID string, index int) string { return fmt.Sprintf("%s.%06d", sweepID, index) }

// Ensure creates or updates the work-queue stream, the workers' durable
// pull consumer (explicit ack, cfg's AckWait and MaxDeliver) and the
// dead-letter bucket. The submitter calls it; workers wait for them.
func Ensure(ctx context.Context, js jetstream.JetStream, cfg QueueConfig) (jetstream.Stream, jetstream.KeyValue, error) {
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
		return nil, nil, fmt.Errorf("stream %s: %w", StreamName, err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, StreamName, jetstream.ConsumerConfig{
		Durable:       ConsumerName,
		Description:   "steplab workers",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    cfg.MaxDeliver,
		FilterSubject: SubjectPrefix + ">",
		MaxAckPending: 10000,
	}); err != nil {
		return nil, nil, fmt.Errorf("consumer %s: %w", ConsumerName, err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      DeadBucket,
		Description: "steplab sweep tasks that failed every delivery, with their error",
		History:     1,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("bucket %s: %w", DeadBucket, err)
	}
	return st, kv, nil
}

// DeadLetter is the record of a task that failed every delivery.
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
