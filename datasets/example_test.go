package datasets_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/steplab/steplab/datasets"
)

// ExampleCreate writes a dataset with one table, one row at a time, as the
// simulator does.
func ExampleCreate() {
	root, err := os.MkdirTemp("", "steplab-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	dir := filepath.Join(root, "run")

	w, err := datasets.Create(dir, datasets.Manifest{
		Source: datasets.Source{Kind: "simulate"},
		Tool:   datasets.Tool{Name: "steplab", Version: "dev"},
	}, datasets.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Abort("example failed") // a no-op once Close succeeded

	steps, err := datasets.NewTableWriter[datasets.Step](w, datasets.TableSteps, datasets.TableOptions{})
	if err != nil {
		log.Fatal(err)
	}
	t := int64(0)
	for i := range 1000 {
		s := datasets.Step{
			StepID: int64(i), WorkerID: "w0", Kind: datasets.KindDecode, Role: datasets.RoleProduction,
			BenchmarkID: -1, Valid: true, NumDecodeRequests: 8, NumCachedReqs: 8,
			TScheduleStart: t, TOutput: t + 5_000_000, WallTimeNs: 5_000_000, NarrowTimeNs: 5_000_000,
			GPUTimeNs: datasets.Unknown, WorkerRecvNs: datasets.Unknown, SampleNs: datasets.Unknown,
		}
		t += 5_100_000
		if err := steps.Append(s); err != nil {
			log.Fatal(err)
		}
	}
	if err := steps.Close(); err != nil {
		log.Fatal(err)
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}

	m, err := datasets.ReadManifest(dir)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Status, m.Tables[datasets.TableSteps].Rows, m.Tables[datasets.TableSteps].Parts[0].File)
	// Output: complete 1000 steps.parquet/part-000000.parquet
}

// ExampleScan reads two columns of the steps table.
func ExampleScan() {
	root, err := os.MkdirTemp("", "steplab-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	dir := filepath.Join(root, "run")
	w, _ := datasets.Create(dir, datasets.Manifest{}, datasets.CreateOptions{})
	tw, _ := datasets.NewTableWriter[datasets.Step](w, datasets.TableSteps, datasets.TableOptions{})
	for i := range 5 {
		tw.Append(datasets.Step{StepID: int64(i), Kind: datasets.KindDecode, WallTimeNs: int64(4_000_000 + i*1000)})
	}
	tw.Close()
	w.Close()

	d, err := datasets.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	// Only the columns named by the struct's tags are read.
	type timing struct {
		StepID     int64 `parquet:"step_id"`
		WallTimeNs int64 `parquet:"wall_time_ns"`
	}
	s, err := datasets.Scan[timing](d, datasets.TableSteps)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	for row, err := range s.All() {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(row.StepID, row.WallTimeNs)
	}
	// Output:
	// 0 4000000
	// 1 4001000
	// 2 4002000
	// 3 4003000
	// 4 4004000
}

// ExampleDataset_Check reports the state of every part of a dataset.
func ExampleDataset_Check() {
	root, err := os.MkdirTemp("", "steplab-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	dir := filepath.Join(root, "run")
	w, _ := datasets.Create(dir, datasets.Manifest{}, datasets.CreateOptions{})
	tw, _ := datasets.NewTableWriter[datasets.Request](w, datasets.TableRequests, datasets.TableOptions{PartRows: 2})
	tw.Write([]datasets.Request{{ReqID: "a"}, {ReqID: "b"}, {ReqID: "c"}})
	w.Abort("interrupted") // the part holding "c" was still open

	d, err := datasets.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	rep, err := d.Check()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rep.Status, rep.OK())
	for _, p := range rep.Parts {
		fmt.Println(p.File, p.State, p.Rows)
	}
	// Output:
	// partial true
	// requests.parquet/part-000000.parquet ok 2
}
