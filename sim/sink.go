package sim

import (
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/internal/invariants"
)

// DatasetSink writes what an engine records into a dataset. It lends the
// engine the table writers' own rows (datasets.TableWriter.Next), so each
// step is recorded in place, and the writers batch the rows.
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
	scratch  datasets.Step // lent when the steps writer has failed: Step then says why

	// CheckpointSteps makes every so many steps durable (closing the open
	// parts); 0 leaves part sizes to the table writers.
	CheckpointSteps int
	sinceCheckpoint int
	// rows given to each table since the last commit
	openSteps, openStepReqs, openReqs int
	// rows given to each table in all (checkRows)
	stepRows, stepReqRows, reqRows int64
}

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
	if err := s.steps.WriteRow(st); err != nil {
		return err
	}
	if s.stepReqs != nil {
		if err := s.stepReqs.Write(rs); err != nil {
			return err
		}
	}
	if invariants.Enabled {
		s.stepRows++
		s.stepReqRows += int64(len(rs))
		s.checkRows(st.StepID)
	}
	return nil
}

// checkRows panics, under the invariants build tag, when a table writer
// holds another number of rows than the sink has given it.
func (s *DatasetSink) checkRows(stepID int64) {
	n := [3]int64{s.steps.Rows(), 0, s.reqs.Rows()}
	if s.stepReqs != nil {
		n[1] = s.stepReqs.Rows()
	} else {
		s.stepReqRows = 0
	}
	if n != [3]int64{s.stepRows, s.stepReqRows, s.reqRows} {
		invariants.Failf("dataset sink: after step %d: steps, step_requests and requests hold %v rows, %v were written",
			stepID, n, [3]int64{s.stepRows, s.stepReqRows, s.reqRows})
	}
}

// NextStep lends the engine the steps writer's next row.
func (s *DatasetSink) NextStep() *datasets.Step {
	if row := s.steps.Next(1); row != nil {
		return &row[0]
	}
	return &s.scratch
}

// NextRows lends the engine the step_requests writer's next n rows, when
// the sink writes that table.
func (s *DatasetSink) NextRows(n int) []datasets.StepRequest {
	if s.stepReqs == nil {
		return nil
	}
	return s.stepReqs.Next(n)
}

// Request implements Sink. The row is copied into the writer's batch
// (which gathers the columns once a batch is full), not gathered alone.
func (s *DatasetSink) Request(r *datasets.Request) error {
	s.openReqs++
	if invariants.Enabled {
		s.reqRows++
	}
	if row := s.reqs.Next(1); row != nil {
		row[0] = *r
		return s.reqs.Write(row)
	}
	return s.reqs.WriteRow(r) // the writer failed: this says why
}

// Checkpoint closes the open parts, so that everything recorded so far
// survives an interruption.
func (s *DatasetSink) Checkpoint() error {
	if err := s.steps.Checkpoint(); err != nil {
		return err
	}
	if s.stepReqs != nil {
		if err := s.stepReqs.Checkpoint(); err != nil {
			return err
		}
	}
	if err := s.reqs.Checkpoint(); err != nil {
		return err
	}
	s.openSteps, s.openStepReqs, s.openReqs = 0, 0, 0
	return s.w.Commit()
}

// Close closes the tables.
func (s *DatasetSink) Close() error {
	if err := s.steps.Close(); err != nil {
		return err
	}
	if s.stepReqs != nil {
		if err := s.stepReqs.Close(); err != nil {
			return err
		}
	}
	return s.reqs.Close()
}
