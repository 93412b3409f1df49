package dist

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/steplab/steplab/sweep"
)

// PartMetaKey is the Parquet footer key holding a part's PartMeta (JSON).
const PartMetaKey = "steplab.sweep.part"

// PartMeta is what a part carries beside its rows: enough to rebuild the
// point's audit for sweep.json and the figures.
type PartMeta struct {
	V        int          `json:"v"`
	SweepID  string       `json:"sweep_id"`
	TaskID   string       `json:"task_id"`
	Index    int          `json:"index"`
	Total    int          `json:"total"`
	Scenario string       `json:"scenario"`
	Kind     string       `json:"kind,omitempty"`
	Vary     []sweep.Vary `json:"vary"`
	// Digest is the task's input digest (Task.Digest) the part was run
	// from.
	Digest string            `json:"digest"`
	Point  sweep.PointResult `json:"point"`
}

// WritePart stores a one-point result as dir/<task id>.parquet durably:
// written under a temporary name, fsynced, renamed over any earlier part
// of the same task, and the directory fsynced. It returns the part's path.
func WritePart(dir, sweepID string, total int, digest string, res *sweep.Result) (string, error) {
	if len(res.Points) != 1 {
		return "", fmt.Errorf("distsweep: a part holds one point, not %d", len(res.Points))
	}
	p := res.Points[0]
	meta := PartMeta{V: ProtocolVersion, SweepID: sweepID, TaskID: TaskID(sweepID, p.Index), Index: p.Index,
		Total: total, Scenario: res.Scenario, Kind: res.Kind, Vary: res.Vary, Digest: digest, Point: p}
	mb, err := json.Marshal(meta)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	final := filepath.Join(dir, PartName(sweepID, p.Index))
	f, err := os.CreateTemp(dir, "."+meta.TaskID+".parquet.tmp-*")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	fail := func(err error) (string, error) {
		f.Close()
		os.Remove(tmp)
		return "", err
	}
	if err := sweep.WriteRows(f, res, map[string]string{PartMetaKey: string(mb)}); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return "", err
	}
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return "", err
		}
	}
	return final, nil
}

// ReadPart reads a part's metadata and checks its rows against it.
func ReadPart(path string) (*PartMeta, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s, ok := pf.Lookup(PartMetaKey)
	if !ok {
		return nil, fmt.Errorf("%s: not a sweep part (no %s metadata)", path, PartMetaKey)
	}
	var m PartMeta
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", path, PartMetaKey, err)
	}
	if m.V != ProtocolVersion {
		return nil, fmt.Errorf("%s: part protocol version %d, this steplab reads %d", path, m.V, ProtocolVersion)
	}
	r := sweep.Result{Kind: m.Kind, Vary: m.Vary, Points: []sweep.PointResult{m.Point}}
	if want := int64(r.NumRows()); pf.NumRows() != want {
		return nil, fmt.Errorf("%s: %d rows, its audit has %d", path, pf.NumRows(), want)
	}
	return &m, nil
}

// PartsIn lists the parts in dir by sweep id and point index (temporary
// files ignored).
func PartsIn(dir string) (map[string]map[int]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]map[int]string{}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		id, i, ok := parsePartName(e.Name())
		if !ok {
			continue
		}
		if out[id] == nil {
			out[id] = map[int]string{}
		}
		out[id][i] = filepath.Join(dir, e.Name())
	}
	return out, nil
}

// Merged is a merge's outcome.
type Merged struct {
	SweepID string
	Total   int
	// Result holds the points found, in index order.
	Result *sweep.Result
	// Missing are the indices without a part.
	Missing []int
}

// Merge reads the parts of sweep id (empty: the only sweep in dir) and
// gathers them in point order into the result a local sweep gives; write
// it with sweep.Write. Missing points are listed, not an error. With
// digests (by point index), a part run from other inputs than its point's
// is refused.
func Merge(dir, sweepID string, digests map[int]string) (*Merged, error) {
	all, err := PartsIn(dir)
	if err != nil {
		return nil, err
	}
	if sweepID == "" {
		var ids []string
		for id := range all {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		switch len(ids) {
		case 0:
			return nil, fmt.Errorf("%s: no sweep parts (<sweep id>-<index>.parquet)", dir)
		case 1:
			sweepID = ids[0]
		default:
			return nil, fmt.Errorf("%s holds parts of %d sweeps (%v): name one with --sweep-id", dir, len(ids), ids)
		}
	}
	parts := all[sweepID]
	if len(parts) == 0 {
		return nil, fmt.Errorf("%s: no parts of sweep %s", dir, sweepID)
	}
	idx := make([]int, 0, len(parts))
	for i := range parts {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	m := &Merged{SweepID: sweepID, Result: &sweep.Result{}}
	for _, i := range idx {
		pm, err := ReadPart(parts[i])
		if err != nil {
			return nil, err
		}
		if pm.SweepID != sweepID || pm.Index != i || pm.Point.Index != i {
			return nil, fmt.Errorf("%s: holds %s point %d", parts[i], pm.SweepID, pm.Point.Index)
		}
		if want, ok := digests[i]; digests != nil && (!ok || pm.Digest != want) {
			return nil, fmt.Errorf("%s: %w", parts[i], &DigestError{Index: i, Got: pm.Digest, Want: want})
		}
		if m.Total == 0 {
			m.Total, m.Result.Vary, m.Result.Kind = pm.Total, pm.Vary, pm.Kind
		} else if pm.Total != m.Total {
			return nil, fmt.Errorf("%s: a sweep of %d points, other parts say %d", parts[i], pm.Total, m.Total)
		}
		if i >= pm.Total {
			return nil, fmt.Errorf("%s: point %d of a %d-point sweep", parts[i], i, pm.Total)
		}
		m.Result.Scenario = pm.Scenario // the last point's name, as a local sweep
		m.Result.Points = append(m.Result.Points, pm.Point)
	}
	for i := 0; i < m.Total; i++ {
		if _, ok := parts[i]; !ok {
			m.Missing = append(m.Missing, i)
		}
	}
	return m, nil
}

// WaitParts polls dir until sweep id (empty: the only one) has all its
// parts, or ctx ends; then it merges. The final step of an Indexed Job.
func WaitParts(ctx context.Context, dir, sweepID string, poll time.Duration) (*Merged, error) {
	if poll <= 0 {
		poll = time.Second
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	total := 0
	for {
		all, err := PartsIn(dir)
		if err == nil {
			parts := all[sweepID]
			if sweepID == "" && len(all) == 1 {
				for _, ps := range all {
					parts = ps
				}
			}
			if total == 0 {
				for _, path := range parts {
					if pm, err := ReadPart(path); err == nil {
						total = pm.Total
					}
					break
				}
			}
			if total > 0 && len(parts) >= total {
				return Merge(dir, sweepID, nil)
			}
		}
		select {
		case <-ctx.Done():
			return Merge(dir, sweepID, nil)
		case <-t.C:
		}
	}
}

// DigestError is a part whose inputs are not its point's.
type DigestError struct {
	Index     int
	Got, Want string
}

func (e *DigestError) Error() string {
	return fmt.Sprintf("point %d was run from other inputs (digest %.12s) than the sweep's (%.12s): refused", e.Index, e.Got, e.Want)
}
