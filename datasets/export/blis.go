package export

import (
	"encoding/csv"
	"fmt"
	"io"
	"sort"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/datasets/importers"
)

// BLIS is the format name of a BLIS (inference-sim) TraceV2 export.
const BLIS = "blis"

// BLISResult names the two files of a BLIS export.
type BLISResult struct {
	Header   string `json:"header"`
	Data     string `json:"data"`
	Requests int    `json:"requests"`
	// Notes says what the trace could not carry.
	Notes []string `json:"notes,omitempty"`
}

// BLISTrace writes the requests of the dataset at dir as a BLIS TraceV2
// trace, prefix+".yaml" (header) and prefix+".csv" (data), as BLIS's
// `run --trace-output PREFIX` writes them, so that `blis replay
// --trace-header PREFIX.yaml --trace-data PREFIX.csv` runs the same
// workload. The layout follows ExportTraceV2 and LoadTraceV2
// (inference-sim sim/workload/tracev2.go @ f90a1e3a): the 27 base columns,
// times in integer microseconds.
//
// Per request (rows by arrival): request_id is its position; the engine
// arrival goes to arrival_time_us and send_time_us (no client queue);
// first_chunk_time_us and last_chunk_time_us are the first-token and finish
// times, 0 where unknown; status is ok (finished), error (aborted) or
// incomplete (unfinished, or a trace that never ran); output_tokens is the
// recorded length, which BLIS replays exactly. Shared prefixes: requests
// whose prefix_hash_ids start with the same id form a prefix_group whose
// prefix_length is the hash block size (the manifest's workload
// hash_block_size, else importers.BLISHashBlockTokens) times the number of
// leading ids they all share; input_tokens is then the rest of the prompt
// (BLIS counts the suffix only). A tree of prefixes (Mooncake) is thus
// reduced to one shared prefix per first block. The header's mode is real
// when the record has measured times, else generated; its server section
// carries the manifest's model and engine limits; the per-request model
// column is left empty (BLIS's default model: a name there must match the
// model BLIS is run with, or the request is rejected).
func BLISTrace(dir, prefix string) (*BLISResult, error) {
	d, err := datasets.Open(dir)
	if err != nil {
		return nil, err
	}
	if !d.Has(datasets.TableRequests) {
		return nil, fmt.Errorf("%s: no requests table: a BLIS trace is a request trace", dir)
	}
	rows, err := datasets.ReadAll[datasets.Request](d, datasets.TableRequests)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: the requests table is empty", dir)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].ArrivalNs < rows[j].ArrivalNs })
	m := d.Manifest
	block := int64(importers.BLISHashBlockTokens)
	if v, err := m.HashBlockSize(); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	} else if v > 0 {
		block = int64(v)
	}
	groups := blisGroups(rows, block)

	hdr := importers.BLISTraceHeader{Version: 2, TimeUnit: "microseconds", Mode: "generated"}
	for _, r := range rows {
		if r.FirstTokenNs >= 0 || r.FinishNs >= 0 {
			hdr.Mode = "real"
			break
		}
	}
	res := &BLISResult{Header: prefix + ".yaml", Data: prefix + ".csv", Requests: len(rows)}
	if m != nil {
		sv := &importers.BLISTraceServer{}
		if m.Model != nil {
			sv.Model, sv.TensorParallel = m.Model.Name, m.Model.TensorParallel
		}
		if e := m.Engine; e != nil {
			sv.MaxNumSeqs, sv.BlockSize, sv.GPUMemoryUtilization, sv.MaxModelLen = e.MaxNumSeqs, e.BlockSize, e.GPUMemoryUtilization, int64(e.MaxModelLen)
			if e.TensorParallelSize > 0 {
				sv.TensorParallel = e.TensorParallelSize
			}
		}
		if *sv != (importers.BLISTraceServer{}) {
			hdr.Server = sv
		}
		if m.Workload != nil && m.Workload.Seed != 0 {
			seed := int64(m.Workload.Seed & (1<<63 - 1))
			hdr.WorkloadSeed = &seed
		}
	}
	hb, err := yaml.Marshal(&hdr)
	if err != nil {
		return nil, err
	}
	if err := datasets.WriteFileAtomic(res.Header, hb); err != nil {
		return nil, err
	}
	us := func(ns int64) string {
		if ns < 0 {
			return "0"
		}
		return strconv.FormatInt(ns/1000, 10)
	}
	var preempt int
	err = datasets.WriteAtomic(res.Data, func(w io.Writer) error {
		cw := csv.NewWriter(w)
		if err := cw.Write(importers.BLISColumns); err != nil {
			return err
		}
		for i, r := range rows {
			g := groups[i]
			status := "incomplete"
			switch r.Status {
			case datasets.StatusFinished:
				status = "ok"
			case datasets.StatusAborted:
				status = "error"
			}
			if r.NumPreemptions > 0 {
				preempt++
			}
			arrival := us(r.ArrivalNs)
			rec := []string{strconv.Itoa(i), "", "", "", "", "0", g.name, strconv.FormatInt(g.length, 10), "true",
				strconv.FormatInt(r.PromptTokens-g.length, 10), strconv.FormatInt(r.OutputTokens, 10),
				strconv.FormatInt(r.PromptTokens, 10), "0", "0", "0", "0", "", "0", "0",
				arrival, arrival, us(r.FirstTokenNs), us(r.FinishNs), "0", status, "", ""}
			if err := cw.Write(rec); err != nil {
				return err
			}
		}
		cw.Flush()
		return cw.Error()
	})
	if err != nil {
		return nil, err
	}
	res.Notes = append(res.Notes, "times in whole microseconds (nanoseconds truncated); num_chunks 0 (not recorded); no client, tenant, SLO or session columns")
	if n := len(groups.names()); n > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d prefix groups from shared leading prefix_hash_ids (%d-token blocks)", n, block))
	}
	if preempt > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d requests were preempted in the record; a trace cannot say so", preempt))
	}
	return res, nil
}

// blisGroup is the prefix group of one request ("" for none).
type blisGroup struct {
	name   string
	length int64 // tokens
}

type blisGroupList []blisGroup

func (g blisGroupList) names() []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range g {
		if x.name != "" && !seen[x.name] {
			seen[x.name] = true
			out = append(out, x.name)
		}
	}
	return out
}

// blisGroups groups requests by the first of their prefix_hash_ids; a
// group of two or more gets the prefix the members all share: the common
// leading ids, in tokens, at most each member's prompt. Groups are named
// by first appearance: prefix-0, prefix-1, ...
func blisGroups(rows []datasets.Request, block int64) blisGroupList {
	type acc struct {
		members []int
		common  []int64
	}
	byFirst := map[int64]*acc{}
	var order []int64
	for i, r := range rows {
		if len(r.PrefixHashIDs) == 0 {
			continue
		}
		f := r.PrefixHashIDs[0]
		a := byFirst[f]
		if a == nil {
			a = &acc{common: r.PrefixHashIDs}
			byFirst[f] = a
			order = append(order, f)
		}
		n := 0
		for n < len(a.common) && n < len(r.PrefixHashIDs) && a.common[n] == r.PrefixHashIDs[n] {
			n++
		}
		a.common = a.common[:n]
		a.members = append(a.members, i)
	}
	out := make(blisGroupList, len(rows))
	k := 0
	for _, f := range order {
		a := byFirst[f]
		if len(a.members) < 2 {
			continue
		}
		length := int64(len(a.common)) * block
		for _, i := range a.members {
			length = min(length, rows[i].PromptTokens)
		}
		name := "prefix-" + strconv.Itoa(k)
		k++
		for _, i := range a.members {
			out[i] = blisGroup{name: name, length: length}
		}
	}
	return out
}
