package datasets

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pipeScript is what a run of the simulator writes, in small: steps,
// step_requests and requests (a list column, whose slices the caller
// reuses once Write returns) in batches of random size, the tables held
// and committed together every few batches, as sim.DatasetSink does.
type pipeScript struct {
	steps       []Step
	stepReqs    []StepRequest
	reqs        []Request
	opts        TableOptions
	batches     []int  // rows of steps per batch; step_requests get 4 a step
	lend        []bool // batch i is written into rows the table writers lend (Next)
	commitEvery int
	// block, when set, is a directory put where part 2 of step_requests
	// would be created, so that writing that part fails.
	block bool
}

func newPipeScript(r *rand.Rand) pipeScript {
	n := r.IntN(3000)
	s := pipeScript{steps: simSteps(n, r.Uint64()), stepReqs: simStepRequests(4*n, r.Uint64()),
		reqs: simRequests(r.IntN(n+1), r.Uint64()), commitEvery: 1 + r.IntN(6)}
	s.opts.PartRows = []int64{97, 256, 1000, 4096}[r.IntN(4)]
	s.opts.RowGroupRows = 1 + r.IntN(int(s.opts.PartRows))
	for left := n; left > 0; {
		k := min(left, 1+r.IntN(300))
		s.batches = append(s.batches, k)
		s.lend = append(s.lend, r.IntN(2) == 0)
		left -= k
	}
	return s
}

// lent writes rows into the rows tw lends, as sim.DatasetSink does.
func lent[T any](tw *TableWriter[T], rows []T) error {
	dst := tw.Next(len(rows))
	if dst == nil && len(rows) > 0 {
		return tw.Write(rows) // the writer failed: Write says why
	}
	copy(dst, rows)
	return tw.Write(dst)
}

// write runs the script into dir with the given encoders and returns the
// error the caller saw (after aborting, as sim.WriteDataset does); with
// lend, the batches the script says go into lent rows.
func (s pipeScript) write(t *testing.T, dir string, encoders int, lend bool) error {
	w, err := Create(dir, Manifest{Source: Source{Kind: "test"}}, CreateOptions{Encoders: encoders})
	require.NoError(t, err)
	w.Hold()
	steps, err := NewTableWriter[Step](w, TableSteps, s.opts)
	require.NoError(t, err)
	stepReqs, err := NewTableWriter[StepRequest](w, TableStepRequests, s.opts)
	require.NoError(t, err)
	reqs, err := NewTableWriter[Request](w, TableRequests, s.opts)
	require.NoError(t, err)
	if s.block {
		require.NoError(t, os.Mkdir(stepReqs.tmpPath(2), 0o755))
	}
	fill := func() error {
		at, r := 0, 0
		for i, k := range s.batches {
			nr := len(s.reqs) * (at + k) / len(s.steps)
			write, writeReqs, writeRs := steps.Write, stepReqs.Write, reqs.Write
			if lend && s.lend[i] {
				write = func(rows []Step) error { return lent(steps, rows) }
				writeReqs = func(rows []StepRequest) error { return lent(stepReqs, rows) }
				writeRs = func(rows []Request) error { return lent(reqs, rows) }
			}
			rs := slices.Clone(s.reqs[r:nr])
			for j := range rs {
				rs[j].PrefixHashIDs = slices.Clone(rs[j].PrefixHashIDs)
			}
			for _, err := range []error{write(s.steps[at : at+k]), writeReqs(s.stepReqs[4*at : 4*(at+k)]), writeRs(rs)} {
				if err != nil {
					return err
				}
			}
			for j := range rs { // the caller's lists are its own again
				for h := range rs[j].PrefixHashIDs {
					rs[j].PrefixHashIDs[h] = -1
				}
			}
			at, r = at+k, nr
			if i%s.commitEvery == 0 {
				for _, err := range []error{steps.Checkpoint(), stepReqs.Checkpoint(), reqs.Checkpoint(), w.Commit()} {
					if err != nil {
						return err
					}
				}
			}
		}
		for _, err := range []error{steps.Close(), stepReqs.Close(), reqs.Close()} {
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := fill(); err != nil {
		require.NoError(t, w.Abort(err.Error()))
		return err
	}
	return w.Close()
}

// TestPipelinedWriterSameBytes is a metamorphic test of the pipelined
// writer: the same script written sequentially and with 0 to MaxEncoders
// encoders, under 1, 2 and 4 processors, some batches into lent rows,
// gives the same files (every part, byte for byte) and the same manifest.
func TestPipelinedWriterSameBytes(t *testing.T) {
	r := seededRand(t)
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)
	for round := range 4 {
		s := newPipeScript(r)
		ref := filepath.Join(t.TempDir(), "ds")
		require.NoError(t, s.write(t, ref, 0, false))
		want, err := DirSHA256(ref)
		require.NoError(t, err)
		for _, p := range []int{1, 2, 4} {
			runtime.GOMAXPROCS(p)
			for enc := 0; enc <= MaxEncoders; enc++ {
				dir := filepath.Join(t.TempDir(), "ds")
				require.NoError(t, s.write(t, dir, enc, true))
				got, err := DirSHA256(dir)
				require.NoError(t, err)
				require.Equal(t, want, got, "round %d (%d steps, parts of %d rows): %d encoders on %d processors", round, len(s.steps), s.opts.PartRows, enc, p)
			}
		}
	}
}

// TestPipelinedWriterFailure makes the encoder of one part fail (its
// temporary file cannot be created) and checks, for the sequential and the
// pipelined writer, that the caller sees the error and that what is left
// is a partial dataset whose listed parts are exactly the first parts of
// the complete one, with no temporary file of the writer's left.
func TestPipelinedWriterFailure(t *testing.T) {
	r := seededRand(t)
	s := newPipeScript(r)
	s.steps, s.stepReqs = simSteps(2000, r.Uint64()), simStepRequests(8000, r.Uint64())
	s.batches, s.lend, s.opts = []int{500, 500, 500, 500}, []bool{false, true, true, false}, TableOptions{PartRows: 1000, RowGroupRows: 400}
	ref := filepath.Join(t.TempDir(), "ds")
	require.NoError(t, s.write(t, ref, 0, false))
	whole, err := Open(ref)
	require.NoError(t, err)
	s.block = true
	for _, enc := range []int{0, 1, MaxEncoders} {
		t.Run(fmt.Sprintf("encoders=%d", enc), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ds")
			err := s.write(t, dir, enc, true)
			require.Error(t, err)
			assert.Contains(t, err.Error(), ".part-000002.parquet.tmp")
			d, err := Open(dir)
			require.NoError(t, err)
			assert.Equal(t, DatasetPartial, d.Manifest.Status)
			require.Len(t, d.Manifest.Notes, 1)
			assert.True(t, strings.HasPrefix(d.Manifest.Notes[0], "partial: "), d.Manifest.Notes)
			assert.Len(t, d.Manifest.Tables[TableStepRequests].Parts, 2, "the parts before the failed one")
			for table, ti := range d.Manifest.Tables {
				wp := whole.Manifest.Tables[table].Parts
				require.LessOrEqual(t, len(ti.Parts), len(wp), table)
				assert.Equal(t, wp[:len(ti.Parts)], ti.Parts, "%s: the first parts of the complete dataset", table)
			}
			ls, err := Leftovers(dir)
			require.NoError(t, err)
			assert.Empty(t, ls)
			var temps []string
			require.NoError(t, filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
				if err == nil && !e.IsDir() && strings.Contains(e.Name(), ".tmp") {
					temps = append(temps, p)
				}
				return err
			}))
			assert.Empty(t, temps, "no temporary file of the writer's is left")
		})
	}
}

// Rows lent by Next and given back to Write stay where they are: the next
// rows lent follow them in the same buffer (nothing was copied out), for
// the sequential and the pipelined writer; rows from elsewhere are copied.
func TestNextKeepsLentRows(t *testing.T) {
	for _, enc := range []int{0, 2} {
		t.Run(fmt.Sprintf("encoders=%d", enc), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ds")
			w, err := Create(dir, Manifest{}, CreateOptions{Encoders: enc})
			require.NoError(t, err)
			tw, err := NewTableWriter[StepRequest](w, TableStepRequests, DefaultTableOptions)
			require.NoError(t, err)
			want := simStepRequests(10, 1)
			a := tw.Next(3)
			copy(a, want[:3])
			require.NoError(t, tw.Write(a))
			b := tw.Next(2)
			assert.Equal(t, unsafe.Add(unsafe.Pointer(&a[0]), 3*unsafe.Sizeof(a[0])), unsafe.Pointer(&b[0]), "kept in place")
			r := want[3]
			require.NoError(t, tw.WriteRow(&r))     // not a lent row: copied
			r = StepRequest{}                       // the caller's to reuse at once
			require.NoError(t, tw.Write(want[4:5])) // not the lent rows: copied
			c := tw.Next(5)
			copy(c, want[5:])
			require.NoError(t, tw.WriteRow(&c[0]))
			require.NoError(t, tw.Write(c[1:]))
			require.NoError(t, tw.Close())
			require.NoError(t, w.Close())
			d, err := Open(dir)
			require.NoError(t, err)
			got, err := ReadAll[StepRequest](d, TableStepRequests)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

// A part that rows lent for it opened is not written empty: rows lent
// right after a part filled, then a checkpoint (the dataset sink's, before
// the step that would overflow it), leave the parts the sequential writer
// leaves, and an empty table still gets its one empty part.
func TestLentRowsOpenNoEmptyPart(t *testing.T) {
	var digests []string
	for _, enc := range []int{0, 2} {
		src := simStepRequests(11, 2)
		dir := filepath.Join(t.TempDir(), "ds")
		w, err := Create(dir, Manifest{}, CreateOptions{Encoders: enc})
		require.NoError(t, err)
		tw, err := NewTableWriter[StepRequest](w, TableStepRequests, TableOptions{PartRows: 4})
		require.NoError(t, err)
		empty, err := NewTableWriter[Request](w, TableRequests, TableOptions{PartRows: 4})
		require.NoError(t, err)
		// Two steps fill a part of 4 rows; the next is lent its row and
		// the part closed before it is written, twice.
		for i, k := range []int{2, 2, 1, 3, 1, 2} {
			rows := tw.Next(k)
			src = src[copy(rows, src):]
			if i == 2 || i == 4 {
				require.NoError(t, tw.Checkpoint())
			}
			require.NoError(t, tw.Write(rows))
		}
		require.NoError(t, tw.Close())
		require.NoError(t, empty.Close())
		require.NoError(t, w.Close())
		m, err := ReadManifest(dir)
		require.NoError(t, err)
		var rows []int64
		for _, p := range m.Tables[TableStepRequests].Parts {
			rows = append(rows, p.Rows)
		}
		assert.NotContains(t, rows, int64(0), "encoders=%d", enc)
		assert.Len(t, m.Tables[TableRequests].Parts, 1, "the empty table's one part")
		sha, err := DirSHA256(dir)
		require.NoError(t, err)
		digests = append(digests, sha)
	}
	assert.Equal(t, digests[0], digests[1], "the pipelined writer's files are the sequential writer's")
}
