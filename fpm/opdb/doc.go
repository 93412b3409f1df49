// Package opdb reads and writes databases of measured operation
// latencies, the input of the measured-operations prior (fpm.Ops), and
// ships databases measured on an NVIDIA H200 SXM, among them: vLLM 0.24.0's kernels
// (AIConfigurator's, see data/h200-sxm-vllm-0.24.0/ATTRIBUTION.md) and
// steplab's own GPU worker's operations (data/h200-sxm-worker, the current
// worker, and data/h200-sxm-worker-unfused, the worker before its fused
// element-wise kernels; both measured by `steplab capture ops`).
//
// A database is a directory in AIConfigurator's layout for one GPU and one
// framework version:
//
//	system.yaml                                   the GPU: gpu.mem_bw, gpu.bfloat16_tc_flops,
//	                                              gpu.mem_bw_empirical_scaling_factor,
//	                                              gpu.mem_empirical_constant_latency, node.intra_node_bw
//	gemm/gemm_perf.parquet                        gemm_dtype, m, n, k, latency (ms)
//	attention/context_attention_perf.parquet      batch_size, isl, num_heads, num_key_value_heads,
//	                                              head_dim, kv_cache_dtype, latency; optional attn_dtype,
//	                                              beam_width, step (0), window_size
//	attention/generation_attention_perf.parquet   the same, the KV length being isl + step
//	comm/custom_allreduce_perf.parquet            optional: allreduce_dtype, num_gpus, message_size,
//	                                              kernel_source, latency; optional backend
//	*/collection_meta.yaml                        optional: runtime.framework, runtime.version
//	elementwise/elementwise_perf.parquet          optional, steplab's: op, m, n, latency; optional dtype
//
// Any table may carry a launch column (graph: device time in a CUDA-graph
// replay, the default; eager: calls dispatched one by one from the host),
// and system.yaml a gpu.sm_count, both steplab's additions: an engine's
// steps larger than its largest CUDA graph are priced from the eager rows,
// and with the SM count a ragged decode batch by its longest request.
//
// Other columns and files are ignored, so AIConfigurator's own folders for
// another GPU or framework version load as they are (with the system file
// copied beside them). LoadDir and LoadFS read one into plain tables
// (fpm.OpDB), refusing a malformed one with the file, column and row;
// Open does the same for a name Names lists or a directory; ForHardware
// finds the first shipped database (by name) of a GPU. WriteDir writes a
// database, and ReadBench reads the rows of capture/worker/opbench.py
// into one (what `steplab capture ops` does).
//
// Wherever steplab accepts a model (eval, replay, simulate's fpm:), an
// ops spec names the prior built from a database for the run's model
// shape:
//
//	ops        the database shipped for the hardware
//	ops:NAME   a shipped database
//	ops:DIR    a database directory
//
// and a model artifact of form "ops" (fpm.OpsArtifact; this package
// registers its decoder with fpm.RegisterForm) records a database, a
// shape and an engine (fpm.OpsEngine), as datasets/h200/models/
// ops-worker.json does for steplab's own GPU worker. docs/ops-prior.md
// describes the composition, its error on the H200 captures and its
// limits.
package opdb
