#!/usr/bin/env bash
# CUDA checks of `kvplan verify`: measured cache bytes, torch.cuda.memory_allocated / memory_reserved
# and decode speed against kvplan's predictions, on real model geometries.
#
#   benchmarks/gpu_verify.sh [RESULT_DIR]        (default: $OUT, else benchmarks/results)
#
# Needs a CUDA build of torch and kvplan installed (pip install -e '.[verify]'). Every run has its own
# timeout and the whole script stays under 8 minutes on one H100/H200-class GPU; a failing run is
# recorded and the script goes on. Results: one JSON report per run, its stderr, summary.md.
# Exit code: 0 when every run passed, 1 when any missed its tolerance or failed.
set -u
cd "$(dirname "$0")/.."
RESULTS="${1:-${OUT:-benchmarks/results}}"
mkdir -p "$RESULTS"
START=$(date +%s)
BUDGET=${GPU_VERIFY_BUDGET:-450}   # seconds; every run is cut so the whole script ends before 8 minutes
PER_RUN="${PER_RUN_TIMEOUT:-90}"
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
# The first interpreter whose torch sees CUDA and that imports kvplan ($PYTHON first; a carried .venv
# may hold a CPU-only torch).
PY=""
for candidate in ${PYTHON:-} .venv/bin/python python3 python; do
  command -v "$candidate" > /dev/null 2>&1 || continue
  if "$candidate" -c 'import torch, kvplan, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null; then
    PY=$candidate; break
  fi
done

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "python: ${PY:-none with a CUDA torch and kvplan}"
  [ -n "$PY" ] && echo "kvplan: $($PY -c 'import kvplan; print(kvplan.__version__)' 2>&1)"
  [ -n "$PY" ] && echo "torch: $($PY -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>&1)"
  [ -n "$PY" ] && echo "transformers: $($PY -c 'import transformers; print(transformers.__version__)' 2>&1)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 || true
} > "$RESULTS/environment.txt"

if [ -z "$PY" ]; then
  echo "no python whose torch sees a CUDA device and imports kvplan (set PYTHON=...); nothing to verify" \
    | tee "$RESULTS/summary.md"
  exit 2
fi
GPUS=$($PY -c 'import torch; print(torch.cuda.device_count())')

: > "$RESULTS/runs.txt"
run() {  # run NAME ARGS...
  local name=$1; shift
  local limit; limit=$(left)
  [ "$limit" -gt "$PER_RUN" ] && limit=$PER_RUN
  if [ "$limit" -lt 20 ]; then
    echo "$name skipped (time budget)" >> "$RESULTS/runs.txt"; return
  fi
  timeout -k 5 "$limit" $PY -m kvplan verify --gpu --no-progress --format json "$@" \
    > "$RESULTS/$name.json" 2> "$RESULTS/$name.err"
  echo "$name rc=$? args: $*" >> "$RESULTS/runs.txt"
}

# The caching allocator's worked examples (PyTorch CUDACachingAllocator.cpp): Llama-2-7B static, fp16, B=1. T=4096: 64 x 32 MiB = 2 GiB allocated = reserved.
run llama2-7b-static-4096 -m meta-llama/Llama-2-7b-hf --layout static --prompt-len 4095 --gen-len 1
# T=1000: 8,192,000 B tensors pack two per 20 MiB segment: 500 MiB allocated, 640 MiB reserved.
run llama2-7b-static-1000 -m meta-llama/Llama-2-7b-hf --layout static --prompt-len 999 --gen-len 1
# Every layout on a GQA model (Llama-3.1-8B: 8 KV heads x 128), 8 layers, batch 8.
for layout in static sliding paged dynamic; do
  run "llama3-8b-$layout" -m meta-llama/Llama-3.1-8B --layers 8 --layout "$layout" --batch 8 --prompt-len 2000 --gen-len 48
done
run llama3-8b-quantized-int4 -m meta-llama/Llama-3.1-8B --layers 8 --layout quantized --kv-dtype int4 \
  --batch 8 --prompt-len 2000 --gen-len 48 --residual-length 32
run llama3-8b-static-fp8 -m meta-llama/Llama-3.1-8B --layers 8 --layout static --kv-dtype fp8 --batch 8 \
  --prompt-len 2000 --gen-len 48
# MLA, sliding window, hybrid with Mamba states.
run deepseek-v2-lite-paged -m deepseek-ai/DeepSeek-V2-Lite --layers 8 --layout paged --block-size 64 --batch 8 \
  --prompt-len 2000 --gen-len 48
run gpt-oss-20b-sliding -m openai/gpt-oss-20b --layers 8 --layout sliding --batch 8 --prompt-len 1000 --gen-len 48
run jamba-static -m ai21labs/Jamba-v0.1 --layers 9 --layout static --batch 4 --prompt-len 1000 --gen-len 32
# Decode speed against the bandwidth floor: a full 32-layer static cache, 16 x 4096 tokens.
run llama3-8b-speed -m meta-llama/Llama-3.1-8B --layout static --batch 16 --prompt-len 4000 --gen-len 96
if [ "$GPUS" -ge 2 ]; then
  run llama3-8b-tp2 -m meta-llama/Llama-3.1-8B --layers 8 --layout static --tp 2 --batch 8 --prompt-len 2000 --gen-len 32
fi
# The transformers cross-check on the GPU (cache tensors only), when transformers is installed.
if $PY -c 'import transformers' 2> /dev/null; then
  run hf-mistral-dynamic -m mistralai/Mistral-7B-v0.1 --layers 2 --engine transformers --batch 4 --prompt-len 5000 \
    --gen-len 8
fi
# The pytest CUDA tests, if there is time left for them.
if [ "$(left)" -ge 60 ]; then
  timeout -k 5 "$(left)" $PY -m pytest -q -p no:cacheprovider -m gpu tests/test_verify.py > "$RESULTS/pytest_gpu.txt" 2>&1
  echo "pytest-gpu rc=$?" >> "$RESULTS/runs.txt"
else
  echo "pytest-gpu skipped (time budget)" >> "$RESULTS/runs.txt"
fi

$PY - "$RESULTS" <<'PYEOF'
import json, pathlib, sys
root = pathlib.Path(sys.argv[1])
rows, ok = [], True
for path in sorted(root.glob("*.json")):
    try:
        rep = json.loads(path.read_text())
        v = rep["verify"]
    except Exception as exc:  # a failed run: its .err says why
        rows.append(f"| {path.stem} | failed: {type(exc).__name__} ({path.stem}.err) | | | | | |")
        ok = False
        continue
    a, r = v["allocated"], v["reserved"]
    pct = lambda x: "-" if x is None else f"{x:.4%}"
    n = lambda x: "-" if x is None else f"{x:,}"
    frac = "-" if v["bandwidth_fraction"] is None else f"{v['bandwidth_fraction']:.1%}"
    step = "-" if v["step_seconds"] is None else f"{v['step_seconds'] * 1e3:.3f} ms"
    rows.append(
        f"| {path.stem} | {v['predicted_bytes']:,} / {v['measured_bytes']:,} {'ok' if v['match'] else 'MISMATCH'} "
        f"| {n(a['predicted'])} / {n(a['measured'])} ({pct(a['relative_error'])}) "
        f"| {n(r['predicted'])} / {n(r['measured'])} ({pct(r['relative_error'])}{'' if r['judged'] else ', not judged'}) "
        f"| {step} | {frac} | {'pass' if v['passed'] else 'FAIL'} |"
    )
    ok &= bool(v["passed"])
head = ("| run | cache bytes predicted / measured | allocated predicted / measured | reserved predicted / measured "
        "| step | of bandwidth floor | verdict |\n|---|---|---|---|---|---|---|")
runs = (root / "runs.txt").read_text().splitlines() if (root / "runs.txt").exists() else []
for line in runs:
    if line.startswith("pytest-gpu rc=") and line != "pytest-gpu rc=0":
        ok = False
text = "\n".join([head, *rows]) + "\n\n" + "\n".join(runs) + "\n"
(root / "summary.md").write_text(text)
print(text)
sys.exit(0 if ok else 1)
PYEOF
