#!/usr/bin/env bash
# Captures ground-truth datasets like those of datasets/h200/ on a GPU
# machine, for one model shape. Needs bin/steplab built with NVML, for the
# gpu_samples (CGO_ENABLED=1 go build -tags nvml -o bin/steplab ./cmd/steplab,
# where Go is), and a Python with PyTorch, Triton and msgpack. Usage:
#
#   [MODEL=NAME] scripts/device-capture.sh bench|traffic|all OUTDIR
#
# MODEL is a model shape steplab knows (steplab's model.ShapeNames:
# Llama-3.1-8B, the default; Mistral-Nemo-Base-2407; Qwen2.5-7B; the
# mixture of experts Qwen3-30B-A3B; ...): the worker runs that shape with
# random weights. Datasets go to OUTDIR/<model>/:
#
#   bench/admission_step, bench/steady_state_second_step
#       the self-benchmark grid under both decode policies: uniform decode
#       B × context, prefill, ragged-context decode and mixed points
#   traffic-azure-5rps, traffic-azure-12rps
#       the bundled Azure conversation trace, 300 requests at 5 req/s and
#       600 at 12 req/s
#   logs/  the worker's stderr of each capture
#
# LIMIT_A and LIMIT_B lower the request counts of the two traffic runs when
# device time is short. DEVICE=cpu MODEL=tiny SMALL=1 runs the same steps on
# a CPU in a minute or two (PRESET=tiny instead uses the worker's own tiny
# preset). PYTHON picks the interpreter.
set -euo pipefail
what=$1
model=${MODEL:-Llama-3.1-8B}
out=$2/$(echo "$model" | tr '[:upper:]' '[:lower:]')
mkdir -p "$out/logs"
dev=(--device "${DEVICE:-cuda}" --python "${PYTHON:-python3}" --worker capture/worker/worker.py --worker-seed 1 --force
	--set "model=$model")
[ -n "${PRESET:-}" ] && dev+=(--preset "$PRESET")
engine=(--set engine.max_num_seqs=512 --set engine.max_num_batched_tokens=8192 --set engine.max_model_len=16384
	--set 'engine.cuda_graph_sizes=[1,2,4,8,16,24,32,48,64,96,128,192,256,320,384,448,512]')
# Ragged decode points: batch sizes between the CUDA-graph sizes (so that
# padding varies too) × mean contexts × spreads: ramp 1 is uniform, ramp
# 1.5/1.9 spread evenly, tail 3/6 put an eighth of the batch at 3 or 6 times
# the mean. Mixed points: a prefill chunk of 32 to 4096 tokens (either side of
# the largest CUDA graph, 512 tokens) at context 0 or 2000 riding with 0 (the
# chunk alone), a few or many decodes.
spreads='[{shape: ramp, max_ratio: 1}, {shape: ramp, max_ratio: 1.5}, {shape: ramp, max_ratio: 1.9}, {shape: tail, max_ratio: 3}, {shape: tail, max_ratio: 6}]'
if [ -n "${SMALL:-}" ]; then
	engine=(--set engine.max_num_seqs=16 --set engine.max_num_batched_tokens=512 --set engine.max_model_len=8192
		--set engine.num_gpu_blocks=1024)
	grid=(--set 'workload.benchmark.decode_batch_sizes=[1,4,16]' --set 'workload.benchmark.decode_contexts=[16,128]'
		--set 'workload.benchmark.prefill_tokens=[64,256]'
		--set 'workload.benchmark.ragged_batch_sizes=[3,12]' --set 'workload.benchmark.ragged_contexts=[40,100]'
		--set "workload.benchmark.ragged_spreads=$spreads"
		--set 'workload.benchmark.mixed_prefill_tokens=[32,200]' --set 'workload.benchmark.mixed_prefill_contexts=[0,100]'
		--set 'workload.benchmark.mixed_decode_batch_sizes=[0,3,12]' --set 'workload.benchmark.mixed_decode_contexts=[50,300]')
	traffic_a=(--set workload.limit=20 --set workload.rate_rps=20)
	traffic_b=(--set workload.limit=30 --set workload.rate_rps=60)
else
	grid=(--set 'workload.benchmark.decode_batch_sizes=[1,2,4,8,16,32,64,128,256,384,512]'
		--set 'workload.benchmark.decode_contexts=[128,512,1024,2048,4096,8192]'
		--set 'workload.benchmark.prefill_tokens=[128,256,512,1024,2048,4096,8192]'
		--set 'workload.benchmark.ragged_batch_sizes=[3,6,12,20,40,80,120]'
		--set 'workload.benchmark.ragged_contexts=[300,1000,2500]'
		--set "workload.benchmark.ragged_spreads=$spreads"
		--set 'workload.benchmark.mixed_prefill_tokens=[32,64,128,256,384,512,768,1024,2048,4096]'
		--set 'workload.benchmark.mixed_prefill_contexts=[0,2000]'
		--set 'workload.benchmark.mixed_decode_batch_sizes=[0,4,16,48,96]'
		--set 'workload.benchmark.mixed_decode_contexts=[500,1500,4000]')
	traffic_a=(--set workload.limit="${LIMIT_A:-300}" --set workload.rate_rps=5)
	traffic_b=(--set workload.limit="${LIMIT_B:-600}" --set workload.rate_rps=12)
fi
bench() {
	bin/steplab capture bench -o "$out/bench" --policy both "${dev[@]}" "${engine[@]}" "${grid[@]}" \
		--set workload.benchmark.mode=agg --worker-log 2>"$out/logs/bench.log"
}
traffic() {
	# The Azure conversation trace (bundled), rescaled to two rates.
	bin/steplab capture traffic -o "$out/traffic-azure-5rps" "${dev[@]}" "${engine[@]}" "${traffic_a[@]}" --worker-log 2>"$out/logs/traffic-5.log"
	bin/steplab capture traffic -o "$out/traffic-azure-12rps" "${dev[@]}" "${engine[@]}" "${traffic_b[@]}" --worker-log 2>"$out/logs/traffic-12.log"
}
case "$what" in
bench) bench ;;
traffic) traffic ;;
all)
	bench
	traffic
	;;
*)
	echo "usage: [MODEL=NAME] $0 bench|traffic|all OUTDIR" >&2
	exit 2
	;;
esac
