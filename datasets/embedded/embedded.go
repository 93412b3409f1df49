package embedded

import (
	"embed"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
)

//go:embed azure-conv-2023 llmservingsim-llama-3.1-8b llmservingsim-qwen3-30b-a3b mooncake-conv-fast25
var files embed.FS

// Prefix marks an embedded source in a path argument: "embedded:NAME".
const Prefix = "embedded:"

// Dataset describes one embedded dataset.
type Dataset struct {
	Name string // folder name, e.g. "azure-conv-2023"
	// Format is the steplab importer that reads it ("azure", "vllm-requests").
	Format string
	// Main is the file Open returns.
	Main string
	// Upstream names the repository, commit and path the files were copied from.
	Upstream string
	License  string // SPDX identifier
	Summary  string
}

var catalog = map[string]Dataset{
	"azure-conv-2023": {
		Name:     "azure-conv-2023",
		Format:   "azure",
		Main:     "AzureLLMInferenceTrace_conv.csv",
		Upstream: "Azure/AzurePublicDataset@b469a113:data/AzureLLMInferenceTrace_conv.csv",
		License:  "CC-BY-4.0",
		Summary:  "Azure LLM inference trace 2023, conversation: 19,366 arrivals over one hour",
	},
	"llmservingsim-llama-3.1-8b": {
		Name:     "llmservingsim-llama-3.1-8b",
		Format:   "vllm-requests",
		Main:     "requests.jsonl",
		Upstream: "casys-kaist/LLMServingSim@5daddb21:bench/examples/<hw>/<model>/{config.json,vllm/*} (RTX PRO 6000, Llama-3.1-8B)",
		License:  "MIT",
		Summary:  "vLLM 0.19 serving run, Llama-3.1-8B on one RTX PRO 6000: 300 ShareGPT requests with engine timestamps",
	},
	"llmservingsim-qwen3-30b-a3b": {
		Name:     "llmservingsim-qwen3-30b-a3b",
		Format:   "vllm-requests",
		Main:     "requests.jsonl",
		Upstream: "casys-kaist/LLMServingSim@5daddb21:bench/examples/<hw>/<model>/{config.json,vllm/*} (RTX PRO 6000, Qwen3-30B-A3B-Instruct-2507)",
		License:  "MIT",
		Summary:  "vLLM 0.19 serving run, Qwen3-30B-A3B on two RTX PRO 6000 (data parallel 2, expert parallel): 300 ShareGPT requests with engine timestamps",
	},
	"mooncake-conv-fast25": {
		Name:     "mooncake-conv-fast25",
		Format:   "mooncake",
		Main:     "conversation_trace.jsonl",
		Upstream: "kvcache-ai/Mooncake@3b5a5941:FAST25-release/traces/conversation_trace.jsonl (first 3,000 lines)",
		License:  "Apache-2.0",
		Summary:  "Mooncake conversation trace (FAST '25), first 3,000 requests (987 s) with 512-token prefix hash ids",
	},
}

// Names lists the embedded datasets, sorted.
func Names() []string {
	names := make([]string, 0, len(catalog))
	for n := range catalog {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup returns the description of an embedded dataset.
func Lookup(name string) (Dataset, error) {
	name = strings.TrimPrefix(name, Prefix)
	d, ok := catalog[name]
	if !ok {
		return Dataset{}, fmt.Errorf("no embedded dataset %q (have: %s)", name, strings.Join(Names(), ", "))
	}
	return d, nil
}

// Open returns the main file of an embedded dataset (the trace itself).
// name may carry the "embedded:" prefix.
func Open(name string) (io.ReadCloser, error) {
	d, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	return files.Open(path.Join(d.Name, d.Main))
}

// OpenFile returns another file of an embedded dataset's folder, such as
// "meta.json", "LICENSE" or "ATTRIBUTION.md". The error wraps fs.ErrNotExist
// when the folder has no such file.
func OpenFile(name, file string) (io.ReadCloser, error) {
	d, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	if file == "" || strings.ContainsAny(file, `/\`) {
		return nil, fmt.Errorf("embedded %s: invalid file name %q", d.Name, file)
	}
	return files.Open(path.Join(d.Name, file))
}

// Files lists the files of an embedded dataset's folder, sorted.
func Files(name string) ([]string, error) {
	d, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	entries, err := fs.ReadDir(files, d.Name)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out, nil
}
