#!/usr/bin/env bash
# Captures the ground-truth datasets of datasets/h200/ on a GPU machine.
# Needs bin/steplab (built where Go is: scripts/build-device.sh) and a Python
# with PyTorch, Triton and msgpack. Usage:
#   scripts/device-capture.sh bench|traffic OUTDIR
# DEVICE=cpu PRESET=tiny SMALL=1 runs the same steps on a CPU in seconds.
set -euo pipefail
what=$1
out=$2
mkdir -p "$out/logs"
dev=(--device "${DEVICE:-cuda}" --python "${PYTHON:-python3}" --worker capture/worker/worker.py --worker-seed 1 --force)
[ -n "${PRESET:-}" ] && dev+=(--preset "$PRESET")
engine=(--set engine.max_num_seqs=512 --set engine.max_num_batched_tokens=8192 --set engine.max_model_len=16384
	--set 'engine.cuda_graph_sizes=[1,2,4,8,16,24,32,48,64,96,128,192,256,320,384,448,512]')
if [ -n "${SMALL:-}" ]; then
	engine=(--set engine.max_num_seqs=16 --set engine.max_num_batched_tokens=512 --set engine.max_model_len=1024
		--set engine.num_gpu_blocks=1024)
	grid=(--set 'workload.benchmark.decode_batch_sizes=[1,4,16]' --set 'workload.benchmark.decode_contexts=[16,128]'
		--set 'workload.benchmark.prefill_tokens=[64,256]')
	traffic_a=(--set workload.limit=20 --set workload.rate_rps=20)
	traffic_b=(--set workload.limit=30 --set workload.rate_rps=60)
else
	grid=(--set 'workload.benchmark.decode_batch_sizes=[1,2,4,8,16,32,64,128,256,384,512]'
		--set 'workload.benchmark.decode_contexts=[128,512,1024,2048,4096,8192]'
		--set 'workload.benchmark.prefill_tokens=[128,256,512,1024,2048,4096,8192]')
	traffic_a=(--set workload.limit=300 --set workload.rate_rps=5)
	traffic_b=(--set workload.limit=600 --set workload.rate_rps=12)
fi
case "$what" in
bench)
	bin/steplab capture bench -o "$out/bench" --policy both "${dev[@]}" "${engine[@]}" "${grid[@]}" \
		--set workload.benchmark.mode=agg --worker-log 2>"$out/logs/bench.log"
	;;
traffic)
	# The Azure conversation trace (bundled), rescaled to two rates.
	bin/steplab capture traffic -o "$out/traffic-azure-5rps" "${dev[@]}" "${engine[@]}" "${traffic_a[@]}" --worker-log 2>"$out/logs/traffic-5.log"
	bin/steplab capture traffic -o "$out/traffic-azure-12rps" "${dev[@]}" "${engine[@]}" "${traffic_b[@]}" --worker-log 2>"$out/logs/traffic-12.log"
	;;
*)
	echo "usage: $0 bench|traffic OUTDIR" >&2
	exit 2
	;;
esac
