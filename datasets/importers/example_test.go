package importers_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/steplab/steplab/datasets/importers"
)

// Reading a trace into memory: the rows an import would write.
func ExampleReadRequests() {
	rows, err := importers.ReadRequests("burstgpt", "testdata/burstgpt/BurstGPT_1_rows.csv")
	if err != nil {
		panic(err)
	}
	for _, r := range rows {
		fmt.Printf("%s arrives at %.0f s: %d prompt, %d output tokens (%s)\n", r.ReqID, float64(r.ArrivalNs)/1e9, r.PromptTokens, r.OutputTokens, r.Status)
	}
	// Output:
	// 000000 arrives at 0 s: 472 prompt, 18 output tokens (not_run)
	// 000001 arrives at 40 s: 1087 prompt, 230 output tokens (not_run)
	// 000002 arrives at 113 s: 417 prompt, 276 output tokens (not_run)
}

// Writing a dataset from a BLIS trace: the header YAML beside the CSV is
// read too.
func ExampleImport() {
	tmp, err := os.MkdirTemp("", "example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(tmp)
	res, err := importers.Import("blis", "testdata/blis/qwen3-14b-run.csv", filepath.Join(tmp, "ds"), importers.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Format, res.Table, res.Rows)
	// Output: blis requests 40
}
