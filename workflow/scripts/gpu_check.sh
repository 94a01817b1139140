#!/usr/bin/env bash
# The first GPU's check, in under ten minutes on one GPU (src/parallel_experts/gpu_check.py): a paper-shape training
# update of each family compiled (XLA's memory plan beside the CPU rehearsal's), timed and priced as the plan's
# efficiency, and Table 5's decode latency of L1 E16 against L16 E1; one JSON file. docs/benchmarks.md: "The first GPU".
#
#   bash workflow/scripts/gpu_check.sh [--smoke] [OUT] [gpu-check options ...]
#
# OUT (or $GPU_CHECK_OUT; default results.paths.GPU_CHECK, with --smoke GPU_CHECK_SMOKE) receives the JSON.
# --smoke (or GPU_CHECK_SMOKE=1) runs it at config/smoke.yaml's shapes, on a CPU in about a minute; otherwise
# config/paper.yaml (or $GPU_CHECK_CONFIG). Needs `python3` (or $PYTHON) with the packages listed in
# docs/benchmarks.md, not the project installed: the source is put on PYTHONPATH. Exits 1 when a section failed
# (its error is in the JSON).
set -euo pipefail
smoke=${GPU_CHECK_SMOKE:-0}
if [[ "${1:-}" == "--smoke" ]]; then smoke=1; shift; fi
if [[ $# -gt 0 && "$1" != -* ]]; then out=$1; shift; else out=${GPU_CHECK_OUT:-}; fi
if [[ "$smoke" == 1 ]]; then
  config=config/smoke.yaml; default=GPU_CHECK_SMOKE
else
  config=${GPU_CHECK_CONFIG:-config/paper.yaml}; default=GPU_CHECK
fi
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
out=${out:-$("${PYTHON:-python3}" -c "from parallel_experts.results import paths; print(paths.$default)")}
mkdir -p "$(dirname "$out")"
exec "${PYTHON:-python3}" -m parallel_experts gpu-check --config "$config" --out "$out" "$@"
