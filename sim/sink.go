package sim

import (
	"slices"

	"github.com/steplab/steplab/datasets"
)

// DatasetSink writes what an engine records into a dataset, buffering rows
// so that the table writers see large batches.
//
// The tables advance together (datasets.Writer.Hold): parts are committed
// only between steps, when the open part of any table is full
// (datasets.PartRows rows) or at a Checkpoint. A killed run keeps every
// committed part, and its tables are cut at the same step: no
// step_requests row names a step the steps table lacks.
type DatasetSink struct {
	w        *datasets.Writer
	steps    *datasets.TableWriter[datasets.Step]
	stepReqs *datasets.TableWriter[datasets.StepRequest]
	reqs     *datasets.TableWriter[datasets.Request]

	stepBuf    []datasets.Step
	stepReqBuf []datasets.StepRequest
	reqBuf     []datasets.Request

	// CheckpointSteps makes every so many steps durable (closing the open
	// parts); 0 leaves part sizes to the table writers.
	CheckpointSteps int
	sinceCheckpoint int
	// rows given to each table since the last commit
	openSteps, openStepReqs, openReqs int
}

// sinkBatch is the rows buffered per table before they go to its writer:
// one gathering pass of the column writer, so that the rows copied in are
// still in cache when the columns read them back.
const sinkBatch = 256

// NewDatasetSink opens the steps, step_requests (unless withStepRequests
// is false) and requests tables of w.
func NewDatasetSink(w *datasets.Writer, withStepRequests bool) (*DatasetSink, error) {
	s := &DatasetSink{w: w}
	w.Hold()
	var err error
	if s.steps, err = datasets.NewTableWriter[datasets.Step](w, datasets.TableSteps, datasets.DefaultTableOptions); err != nil {
		return nil, err
	}
	if withStepRequests {
		if s.stepReqs, err = datasets.NewTableWriter[datasets.StepRequest](w, datasets.TableStepRequests, datasets.DefaultTableOptions); err != nil {
			return nil, err
		}
	}
	if s.reqs, err = datasets.NewTableWriter[datasets.Request](w, datasets.TableRequests, datasets.DefaultTableOptions); err != nil {
		return nil, err
	}
	return s, nil
}

// Step implements Sink.
func (s *DatasetSink) Step(st *datasets.Step, rs []datasets.StepRequest) error {
	if s.openSteps+1 > datasets.PartRows || s.openStepReqs+len(rs) > datasets.PartRows || s.openReqs >= datasets.PartRows {
		if err := s.Checkpoint(); err != nil {
			return err
		}
	}
	s.openSteps++
	if s.stepReqs != nil {
		s.openStepReqs += len(rs)
	}
	if s.CheckpointSteps > 0 {
		if s.sinceCheckpoint++; s.sinceCheckpoint >= s.CheckpointSteps {
			s.sinceCheckpoint = 0
			defer s.Checkpoint()
		}
	}
	if n := len(s.stepBuf); n < cap(s.stepBuf) && st == &s.stepBuf[:n+1][n] {
		s.stepBuf = s.stepBuf[:n+1] // the row nextStep lent: recorded in place
	} else {
		s.stepBuf = append(s.stepBuf, *st)
	}
	if len(s.stepBuf) >= sinkBatch {
		if err := s.steps.Write(s.stepBuf); err != nil {
			return err
		}
		s.stepBuf = s.stepBuf[:0]
	}
	if s.stepReqs != nil {
		if n := len(s.stepReqBuf); len(rs) > 0 && n+len(rs) <= cap(s.stepReqBuf) && &rs[0] == &s.stepReqBuf[:n+1][n] {
			s.stepReqBuf = s.stepReqBuf[:n+len(rs)] // the rows nextRows lent
		} else {
			s.stepReqBuf = append(s.stepReqBuf, rs...)
		}
		if len(s.stepReqBuf) >= sinkBatch {
			if err := s.stepReqs.Write(s.stepReqBuf); err != nil {
				return err
			}
			s.stepReqBuf = s.stepReqBuf[:0]
		}
	}
	return nil
}

// nextStep lends the engine the row after the buffered steps.
func (s *DatasetSink) nextStep() *datasets.Step {
	n := len(s.stepBuf)
	s.stepBuf = slices.Grow(s.stepBuf, 1)
	return &s.stepBuf[:n+1][n]
}

// nextRows lends the engine the rows after the buffered step_requests
// rows, when the sink writes that table.
func (s *DatasetSink) nextRows(n int) []datasets.StepRequest {
	if s.stepReqs == nil {
		return nil
	}
	l := len(s.stepReqBuf)
	s.stepReqBuf = slices.Grow(s.stepReqBuf, n)
	return s.stepReqBuf[l : l+n : l+n]
}

// Request implements Sink.
func (s *DatasetSink) Request(r *datasets.Request) error {
	s.openReqs++
	s.reqBuf = append(s.reqBuf, *r)
	if len(s.reqBuf) >= sinkBatch {
		if err := s.reqs.Write(s.reqBuf); err != nil {
			return err
		}
		s.reqBuf = s.reqBuf[:0]
	}
	return nil
}

// Checkpoint writes every buffered row and closes the open parts, so that
// everything recorded so far survives an interruption.
func (s *DatasetSink) Checkpoint() error {
	if err := s.steps.Write(s.stepBuf); err != nil {
		return err
	}
	s.stepBuf = s.stepBuf[:0]
	if err := s.steps.Checkpoint(); err != nil {
		return err
	}
	if s.stepReqs != nil {
		if err := s.stepReqs.Write(s.stepReqBuf); err != nil {
			return err
		}
		s.stepReqBuf = s.stepReqBuf[:0]
		if err := s.stepReqs.Checkpoint(); err != nil {
			return err
		}
	}
	if err := s.reqs.Write(s.reqBuf); err != nil {
		return err
	}
	s.reqBuf = s.reqBuf[:0]
	if err := s.reqs.Checkpoint(); err != nil {
		return err
	}
	s.openSteps, s.openStepReqs, s.openReqs = 0, 0, 0
	return s.w.Commit()
}

// Close flushes and closes the tables.
func (s *DatasetSink) Close() error {
	if err := s.steps.Write(s.stepBuf); err != nil {
		return err
	}
	if err := s.steps.Close(); err != nil {
		return err
	}
	if s.stepReqs != nil {
		if err := s.stepReqs.Write(s.stepReqBuf); err != nil {
			return err
		}
		if err := s.stepReqs.Close(); err != nil {
			return err
		}
	}
	if err := s.reqs.Write(s.reqBuf); err != nil {
		return err
	}
	return s.reqs.Close()
}
