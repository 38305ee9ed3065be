"""`kvplan check` on 1,000 scenarios against one scenario, measured side by side in one run (interleaved), and
the bytes a scenario takes in the default report (YAML, what a CI keeps).

Scenarios mix bundled models (dense, sliding, MLA, hybrid Mamba, chunked), engines (vllm, sglang, trtllm,
llama.cpp, ideal, hf-dynamic), TP 1/2/4, lengths, batches and GPUs; every one has ``require_fit_on`` (a
capacity run). Targets: 1,000 scenarios in at most 12x the wall time of one; at most 3 KB a scenario.

    python benchmarks/bench_check.py [--scenarios 1000] [--runs 5] [--distinct]

``--distinct`` gives every scenario its own length (no two scenarios ask the same), so nothing a check
remembers across scenarios (each model, each distinct set of inputs) is reused but the models.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_RATIO = 12
TARGET_BYTES = 3 * 1024

MODELS = ["meta-llama/Llama-3.1-8B", "Qwen/Qwen3-8B", "google/gemma-2-9b", "openai/gpt-oss-20b",
          "deepseek-ai/DeepSeek-V2-Lite", "Qwen/Qwen3-Next-80B-A3B-Instruct", "mistralai/Mistral-7B-v0.1",
          "meta-llama/Llama-4-Scout-17B-16E-Instruct", "ai21labs/Jamba-v0.1", "meta-llama/Llama-3.1-70B-Instruct",
          "google/gemma-3-12b-it", "Qwen/Qwen2.5-7B-Instruct"]
ENGINES = [("vllm", 1), ("vllm", 2), ("sglang", 1), ("trtllm", 2), ("llama.cpp", 1), ("ideal", 1), ("vllm", 4),
           ("hf-dynamic", 1)]
GPUS = ["H100", "H200", "A100-80GB"]
LENGTHS = [4096, 8192, 32768, 131072]

#: This source tree (``python -m`` puts the working folder first on sys.path, so every run starts in the
#: plan's folder and takes kvplan from PYTHONPATH).
ROOT = Path(__file__).resolve().parents[1]


def make_plan(num_scenarios: int, *, distinct: bool = False) -> str:
    """A deterministic plan of ``num_scenarios`` mixed scenarios, each with require_fit_on."""
    lines = ["scenarios:"]
    for i in range(num_scenarios):
        engine, tp = ENGINES[(i // len(MODELS)) % len(ENGINES)]
        seq_len = LENGTHS[(i // 7) % len(LENGTHS)] + (i if distinct else 0)
        lines += [f"  - name: s{i}", f"    model: {MODELS[i % len(MODELS)]}", f"    engine: {engine}", f"    tp: {tp}",
                  f"    batch: {1 + (i // 3) % 8}", f"    seq_len: {seq_len}",
                  f"    require_fit_on: {{gpu: {GPUS[i % len(GPUS)]}, num_gpus: {tp}}}"]
    return "\n".join(lines) + "\n"


def distinct_inputs(plan: str) -> int:
    """Scenarios whose inputs and GPUs no earlier scenario of ``plan`` had."""
    return len({tuple(line for line in block.splitlines()[1:]) for block in plan.split("  - name: ")[1:]})


def run(plan: Path) -> tuple[float, float, float, int]:
    """(wall seconds, CPU seconds, peak RSS in MB, bytes of the YAML report) of one `kvplan check`."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "kvplan", "check", str(plan), "--format", "yaml"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=plan.parent,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    size = len(proc.stdout.read())
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"kvplan check {plan} exited {os.waitstatus_to_exitcode(status)}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, size  # Linux: ru_maxrss in KiB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--distinct", action="store_true", help="no two scenarios with the same inputs")
    args = parser.parse_args()
    # NOTE: an installed wheel has bytecode (pip compiles it); compile the checkout once so no run pays for it.
    compileall.compile_dir(str(ROOT / "kvplan"), quiet=1)
    sizes = (1, args.scenarios)
    with tempfile.TemporaryDirectory() as folder:
        plans = {n: Path(folder) / f"plan_{n}.yaml" for n in sizes}
        for n, path in plans.items():
            path.write_text(make_plan(n, distinct=args.distinct))
        distinct = distinct_inputs(plans[args.scenarios].read_text())
        run(plans[1])  # warm the file cache
        results: dict[int, list[tuple[float, float, float, int]]] = {n: [] for n in sizes}
        for _ in range(args.runs):
            for n in sizes:
                results[n].append(run(plans[n]))
    print(f"kvplan check --format yaml, every scenario with require_fit_on ({distinct:,} of {args.scenarios:,} "
          f"with inputs no other has; medians of {args.runs} runs)")
    print(f"{'scenarios':>10} {'wall s':>8} {'CPU s':>7} {'peak MB':>8} {'report bytes':>13} {'bytes/scenario':>15}")
    medians = {}
    for n in sizes:
        wall, cpu, rss = (statistics.median(r[k] for r in results[n]) for k in range(3))
        size = results[n][0][3]
        medians[n] = (wall, cpu, size)
        print(f"{n:>10,} {wall:>8.2f} {cpu:>7.2f} {rss:>8.1f} {size:>13,} {size / n:>15,.0f}")
    (one_wall, one_cpu, _), (many_wall, many_cpu, many_size) = medians[1], medians[args.scenarios]
    ratio = many_wall / one_wall
    per_scenario = many_size / args.scenarios
    print(f"{args.scenarios:,} scenarios / one: {ratio:.1f}x wall, {many_cpu / one_cpu:.1f}x CPU "
          f"(target <= {TARGET_RATIO}x wall) {'OK' if ratio <= TARGET_RATIO else 'OVER'}")
    print(f"default report: {per_scenario:,.0f} bytes a scenario (target <= {TARGET_BYTES:,}) "
          f"{'OK' if per_scenario <= TARGET_BYTES else 'OVER'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
