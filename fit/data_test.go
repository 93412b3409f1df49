package fit

import (
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/steplab/steplab/datasets"
	"github.com/steplab/steplab/features"
	"github.com/steplab/steplab/fpm"
)

func TestDataFromStepsTargets(t *testing.T) {
	steps := []datasets.Step{
		{StepID: 1, Kind: "decode", NumDecodeRequests: 2, SumDecodeKVTokens: 10, GPUTimeNs: 100, WallTimeNs: 120},
		{StepID: 2, Kind: "decode", NumDecodeRequests: 2, SumDecodeKVTokens: 12, GPUTimeNs: 110, WallTimeNs: 130},
	}
	d, err := DataFromSteps(steps, TargetAuto)
	require.NoError(t, err)
	require.Equal(t, TargetGPU, d.Target)
	require.Equal(t, []float64{100, 110}, d.Y)
	steps[1].GPUTimeNs = datasets.Unknown
	d, err = DataFromSteps(steps, "")
	require.NoError(t, err)
	require.Equal(t, TargetWall, d.Target, "auto never mixes gpu and wall times")
	require.Equal(t, []float64{120, 130}, d.Y)
	_, err = DataFromSteps(steps, TargetGPU)
	require.ErrorContains(t, err, "at row 1 (step_id 2): gpu_time_ns is -1")
	require.Equal(t, []int64{1, 2}, d.StepIDs)
	require.Equal(t, "decode", d.Kind(0))
}

// TestLoadDatasetsStreams: streaming the steps table through the builder
// gives the data of the whole table read at once, completed from
// step_requests and converted, on datasets whose steps table records
// every feature column and on one written before it did.
func TestLoadDatasetsStreams(t *testing.T) {
	for i, dir := range []string{filepath.Join(h200Dir, "bench-steady"), filepath.Join(h200Dir, "qwen2.5-7b/traffic-azure-12rps")} {
		l, err := LoadDatasets([]string{dir}, LoadOptions{Target: TargetWall})
		require.NoError(t, err)
		require.Nil(t, l.Steps, "rows are kept only with KeepSteps")
		d, err := datasets.Open(dir)
		require.NoError(t, err)
		steps, err := datasets.ReadAll[datasets.Step](d, datasets.TableSteps)
		require.NoError(t, err)
		completed, _, err := features.CompleteSteps(d, steps)
		require.NoError(t, err)
		t.Logf("%s: %d steps, %d completed from step_requests", dir, len(steps), completed)
		require.Equal(t, i == 0, completed > 0, "the first predates the feature columns, the second records them")
		kept := slices.DeleteFunc(steps, func(st datasets.Step) bool { return !(Selection{}).Keep(&st) })
		want, err := DataFromSteps(kept, TargetWall)
		require.NoError(t, err)
		require.Equal(t, 512, l.Data.GraphTokens, "%s: the manifest's largest CUDA-graph capture size", dir)
		require.Equal(t, [2]int{132, []int{8, 4}[i]}, [2]int{l.Data.SMs, l.Data.KVHeads}, "%s: the H200's SMs (catalogue) and the model's KV heads (manifest)", dir)
		require.Equal(t, [2]int{3, 32}, [2]int{l.Data.AttnPerSM, l.Data.AttnTile}, "%s: the H200 catalogue's attention programs per SM, of 32-token tiles", dir)
		require.Equal(t, fpm.DecodeKernel{TileTokens: 32, SplitPrograms: 264, SplitMax: 16}, l.Data.Kernel, "%s: the worker generation's split rule", dir)
		want.GraphTokens, want.SMs, want.KVHeads, want.AttnPerSM, want.AttnTile = 512, l.Data.SMs, l.Data.KVHeads, l.Data.AttnPerSM, l.Data.AttnTile
		want.Kernel, want.KernelSource = l.Data.Kernel, l.Data.KernelSource
		require.Equal(t, want, l.Data, dir)
	}
}

// TestLoadDatasetsSample: a bound above every kind's rows changes nothing;
// a bound below keeps a uniform, reproducible sample of each kind, in the
// order read, each row exactly as loaded without a bound, and says so.
func TestLoadDatasetsSample(t *testing.T) {
	paths := h200Paths("llama-3.1-8b/traffic-azure-5rps", "qwen2.5-7b/traffic-azure-5rps")
	full, err := LoadDatasets(paths, LoadOptions{})
	require.NoError(t, err)
	same, err := LoadDatasets(paths, LoadOptions{MaxRowsPerKind: full.Data.Len(), SampleSeed: 1})
	require.NoError(t, err)
	require.Equal(t, full, same, "a bound no kind reaches keeps every row")

	perKind := map[string]int{}
	for i := range full.Data.Len() {
		perKind[full.Data.Kind(i)]++
	}
	const bound = 700
	require.Greater(t, perKind[datasets.KindDecode], 2*2*bound, "the decode rows of the two datasets overflow the bound")
	// (dataset, step_id) → row of the full load; the datasets share an id.
	key := func(l *Loaded, i int) [2]int64 {
		return [2]int64{int64(sort.SearchInts(l.Offsets, i+1) - 1), l.Data.StepID(i)}
	}
	byStep := map[[2]int64]int{}
	for i := range full.Data.Len() {
		byStep[key(full, i)] = i
	}
	require.Len(t, byStep, full.Data.Len())
	for _, seed := range []uint64{1, 2} {
		l, err := LoadDatasets(paths, LoadOptions{MaxRowsPerKind: bound, SampleSeed: seed})
		require.NoError(t, err)
		d := l.Data
		require.NotNil(t, l.Sample)
		require.Equal(t, fpm.Sample{PerKind: bound, Seed: seed, Selected: int64(full.Data.Len()), Kept: int64(d.Len())}, *l.Sample)
		require.Equal(t, l.Sample, l.Record(Selection{}).Sample, "the artifact records the sample")
		require.Equal(t, full.Refs, l.Refs, "the datasets' selected rows are counted whole")
		kinds := map[string]int{}
		prev := -1
		for i := range d.Len() {
			kinds[d.Kind(i)]++
			j, ok := byStep[key(l, i)]
			require.True(t, ok, "row %d names a step of its dataset", i)
			require.Greater(t, j, prev, "rows stay in the order read")
			prev = j
			require.Equal(t, full.Data.Features[j], d.Features[i])
			require.Equal(t, full.Data.Y[j], d.Y[i])
			require.Equal(t, full.Data.Benchmark[j], d.Benchmark[i])
		}
		for k, n := range perKind {
			require.Equal(t, min(n, bound), kinds[k], "kind %s", k)
		}
		// Uniform: the sampled decode timings have the mean of all of them
		// (the standard error of 700 of ~10,000 rows is about 1.5%).
		mean := func(dd *Data) float64 {
			var s float64
			var n int
			for i := range dd.Len() {
				if dd.Kind(i) == datasets.KindDecode {
					s, n = s+dd.Y[i], n+1
				}
			}
			return s / float64(n)
		}
		require.InEpsilon(t, mean(full.Data), mean(d), 0.06, "seed %d", seed)
		again, err := LoadDatasets(paths, LoadOptions{MaxRowsPerKind: bound, SampleSeed: seed})
		require.NoError(t, err)
		require.Equal(t, l, again, "the same seed draws the same sample")
		if seed == 2 {
			first, err := LoadDatasets(paths, LoadOptions{MaxRowsPerKind: bound, SampleSeed: 1})
			require.NoError(t, err)
			require.NotEqual(t, first.Data.StepIDs, d.StepIDs, "another seed draws another sample")
		}
	}
	_, err = LoadDatasets(paths, LoadOptions{MaxRowsPerKind: bound, KeepSteps: true})
	require.ErrorContains(t, err, "KeepSteps")
}

// TestSampleSeesEveryTiming: a timing that cannot be fitted is refused
// even when its row is not among those sampled.
func TestSampleSeesEveryTiming(t *testing.T) {
	b := newBuilder(2, 1)
	for i := range 50 {
		st := datasets.Step{StepID: int64(100 + i), Kind: datasets.KindDecode, NumDecodeRequests: 1, SumDecodeKVTokens: 10, GPUTimeNs: 1000, WallTimeNs: 1200}
		if i == 37 {
			st.WallTimeNs = 0
		}
		b.add(&st)
	}
	require.Equal(t, 2, b.len())
	_, err := b.finish(TargetWall)
	var de *DataError
	require.ErrorAs(t, err, &de)
	require.Equal(t, 37, de.Row)
	require.Equal(t, int64(137), de.StepID)
}
