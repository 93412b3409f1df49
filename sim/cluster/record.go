package cluster

import (
	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/sim"
)

// Tables a cluster run adds to the dataset.
const (
	// TableRoutes has one row per routing decision (a cluster with more
	// than one engine to choose from).
	TableRoutes = datasets.TableRoutes
	// TableTransfers has one row per prompt KV moved from a prefill to a
	// decode engine (disaggregated clusters).
	TableTransfers = datasets.TableTransfers
)

// Route is one routing decision: one row of routes.parquet.
type Route struct {
	ReqID string `parquet:"req_id"`
	// AtNs is when the router decided: the request's arrival for the entry
	// pool, the end of its prefill for a decode pool.
	AtNs   int64  `parquet:"at_ns,delta"`
	Pool   string `parquet:"pool,dict"`
	Router string `parquet:"router,dict"`
	// Worker is the chosen engine (the steps table's worker_id) and DPRank
	// its rank in its expert-parallel instance.
	Worker string `parquet:"worker,dict"`
	DPRank int32  `parquet:"dp_rank,delta"`
	// Candidates is the number of engines the router chose among.
	Candidates int32 `parquet:"candidates,delta"`
	// OverlapBlocks is the prompt's leading blocks the chosen engine held
	// in its prefix cache; PromptBlocks the prompt's full hashed blocks.
	OverlapBlocks int64 `parquet:"overlap_blocks,delta"`
	PromptBlocks  int64 `parquet:"prompt_blocks,delta"`
	// Outstanding is the requests routed to the chosen engine and not
	// finished, KVBlocksUsed its KV blocks in use, both before this one.
	Outstanding  int64 `parquet:"outstanding,delta"`
	KVBlocksUsed int64 `parquet:"kv_blocks_used,delta"`
	// Score is the chosen engine's score and Scores every candidate's, in
	// pool order (lower is better): round_robin turns away, least_requests
	// and session outstanding requests, least_kv the KV fraction used, kv
	// Dynamo's logit, vllm_dp waiting·4 + running.
	Score  float64   `parquet:"score"`
	Scores []float64 `parquet:"scores,list"`
}

// Transfer is one prompt KV moved between engines: one row of
// transfers.parquet. The decode engine admits the request at EndNs.
type Transfer struct {
	ReqID string `parquet:"req_id"`
	From  string `parquet:"from_worker,dict"`
	To    string `parquet:"to_worker,dict"`
	// Bytes is prompt tokens × KV bytes per token (per GPU of the engine).
	Bytes int64 `parquet:"bytes,delta"`
	// StartNs is the prefill's end or, when the link was busy, the end of
	// the transfer before it; EndNs = start + latency + bytes/bandwidth.
	StartNs int64 `parquet:"start_ns,delta"`
	EndNs   int64 `parquet:"end_ns,delta"`
}

// Sink receives what a cluster records: every engine's steps (step ids
// unique in the cluster), one row per request, and the routing decisions
// and transfers. Rows are valid only during the call.
type Sink interface {
	sim.Sink
	Route(r *Route) error
	Transfer(t *Transfer) error
}

// DatasetSink writes a cluster's records into a dataset: the engine tables
// of sim.DatasetSink, and routes and transfers when the cluster has them.
type DatasetSink struct {
	*sim.DatasetSink
	routes    *datasets.TableWriter[Route]
	transfers *datasets.TableWriter[Transfer]
	routeBuf  []Route
	xferBuf   []Transfer
}

// NewDatasetSink opens the tables of w: those of sim.NewDatasetSink, plus
// routes and transfers when asked for.
func NewDatasetSink(w *datasets.Writer, stepRequests, routes, transfers bool) (*DatasetSink, error) {
	base, err := sim.NewDatasetSink(w, stepRequests)
	if err != nil {
		return nil, err
	}
	s := &DatasetSink{DatasetSink: base}
	if routes {
		if s.routes, err = datasets.NewTableWriter[Route](w, TableRoutes, datasets.DefaultTableOptions); err != nil {
			return nil, err
		}
	}
	if transfers {
		if s.transfers, err = datasets.NewTableWriter[Transfer](w, TableTransfers, datasets.DefaultTableOptions); err != nil {
			return nil, err
		}
	}
	return s, nil
}

const sinkBatch = 256

// Route implements Sink.
func (s *DatasetSink) Route(r *Route) error {
	if s.routes == nil {
		return nil
	}
	c := *r
	c.Scores = append([]float64(nil), r.Scores...)
	s.routeBuf = append(s.routeBuf, c)
	if len(s.routeBuf) >= sinkBatch {
		err := s.routes.Write(s.routeBuf)
		s.routeBuf = s.routeBuf[:0]
		return err
	}
	return nil
}

// Transfer implements Sink.
func (s *DatasetSink) Transfer(t *Transfer) error {
	if s.transfers == nil {
		return nil
	}
	s.xferBuf = append(s.xferBuf, *t)
	if len(s.xferBuf) >= sinkBatch {
		err := s.transfers.Write(s.xferBuf)
		s.xferBuf = s.xferBuf[:0]
		return err
	}
	return nil
}

// Close flushes and closes every table.
func (s *DatasetSink) Close() error {
	err := s.DatasetSink.Close()
	if s.routes != nil {
		if werr := s.routes.Write(s.routeBuf); err == nil {
			err = werr
		}
		if cerr := s.routes.Close(); err == nil {
			err = cerr
		}
	}
	if s.transfers != nil {
		if werr := s.transfers.Write(s.xferBuf); err == nil {
			err = werr
		}
		if cerr := s.transfers.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Tee sends everything to several sinks in order; plain sim.Sinks get the
// steps and requests only.
type Tee []sim.Sink

// Step implements sim.Sink.
func (t Tee) Step(s *datasets.Step, rs []datasets.StepRequest) error { return sim.Tee(t).Step(s, rs) }

// Request implements sim.Sink.
func (t Tee) Request(r *datasets.Request) error { return sim.Tee(t).Request(r) }

// Route implements Sink.
func (t Tee) Route(r *Route) error { return t.each(func(s Sink) error { return s.Route(r) }) }

// Transfer implements Sink.
func (t Tee) Transfer(x *Transfer) error { return t.each(func(s Sink) error { return s.Transfer(x) }) }

// lenderOf is the sink of s that lends the rows a step is recorded in
// (sim.LenderOf, through Tees): nil if none.
func lenderOf(s sim.Sink) sim.RowLender {
	if t, ok := s.(Tee); ok {
		for _, k := range t {
			if l := lenderOf(k); l != nil {
				return l
			}
		}
		return nil
	}
	return sim.LenderOf(s)
}

// each calls f on the sinks that are cluster Sinks, in order.
func (t Tee) each(f func(Sink) error) error {
	for _, k := range t {
		if s, ok := k.(Sink); ok {
			if err := f(s); err != nil {
				return err
			}
		}
	}
	return nil
}
