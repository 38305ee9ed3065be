"""`kvplan check` at 1, 100, 1,000 and 10,000 scenarios: wall time, CPU time (user + system, steadier on a
loaded machine) and peak memory (RSS of the process, from os.wait4), each against the one-scenario run
measured in the same session.

Scenarios mix bundled models (dense, sliding, MLA, hybrid Mamba, chunked), engines (vllm, sglang,
trtllm, llama.cpp, ideal, hf-dynamic), TP 1/2/4, lengths, batches and GPUs; every one has
``require_fit_on`` (a capacity run). Targets: 1,000 scenarios within 3x the wall time of one;
memory growth from 1 to 10,000 under 50 MB.

    python benchmarks/bench_check.py [--sizes 1,100,1000,10000] [--format yaml] [--base DIR]

``--base DIR`` also runs every plan with an older kvplan source tree (e.g. ``git archive <commit> | tar
-x -C DIR``) on ``PYTHONPATH``, interleaved with this one, and prints its time and memory beside.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODELS = ["meta-llama/Llama-3.1-8B", "Qwen/Qwen3-8B", "google/gemma-2-9b", "openai/gpt-oss-20b",
          "deepseek-ai/DeepSeek-V2-Lite", "Qwen/Qwen3-Next-80B-A3B-Instruct", "mistralai/Mistral-7B-v0.1",
          "meta-llama/Llama-4-Scout-17B-16E-Instruct", "ai21labs/Jamba-v0.1", "meta-llama/Llama-3.1-70B-Instruct",
          "google/gemma-3-12b-it", "Qwen/Qwen2.5-7B-Instruct"]
ENGINES = [("vllm", 1), ("vllm", 2), ("sglang", 1), ("trtllm", 2), ("llama.cpp", 1), ("ideal", 1), ("vllm", 4),
           ("hf-dynamic", 1)]
GPUS = ["H100", "H200", "A100-80GB"]
LENGTHS = ["4k", "8k", "32k", "128k"]


def make_plan(num_scenarios: int) -> str:
    """A deterministic plan of ``num_scenarios`` mixed scenarios, each with require_fit_on."""
    lines = ["scenarios:"]
    for i in range(num_scenarios):
        engine, tp = ENGINES[(i // len(MODELS)) % len(ENGINES)]
        lines += [f"  - name: s{i}", f"    model: {MODELS[i % len(MODELS)]}", f"    engine: {engine}", f"    tp: {tp}",
                  f"    batch: {1 + (i // 3) % 8}", f"    seq_len: {LENGTHS[(i // 7) % len(LENGTHS)]}",
                  f"    require_fit_on: {{gpu: {GPUS[i % len(GPUS)]}, num_gpus: {tp}}}"]
    return "\n".join(lines) + "\n"


#: This source tree (``python -m`` puts the working folder first on sys.path, so each run starts in the
#: plan's folder and gets its tree from PYTHONPATH alone).
ROOT = str(Path(__file__).resolve().parents[1])


def run(plan: Path, fmt: str, source: str | None = None) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MB) of one `kvplan check` process (kvplan from ``source``
    when given, else this tree)."""
    cmd = [sys.executable, "-m", "kvplan", "check", str(plan), "--format", fmt]
    env = {**os.environ, "PYTHONPATH": source or ROOT}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=plan.parent)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"kvplan check {plan} exited {code}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # Linux: KiB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,100,1000,10000")
    parser.add_argument("--format", default="yaml", choices=["yaml", "json", "table"])
    parser.add_argument("--base", default=None, help="an older kvplan source tree to time beside this one")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    # NOTE: an installed wheel has bytecode (pip compiles it); a source checkout run with
    # PYTHONDONTWRITEBYTECODE=1 would recompile every changed module on every start, so compile once here.
    import compileall

    for tree in (ROOT, args.base):
        if tree:
            compileall.compile_dir(os.path.join(tree, "kvplan"), quiet=1)
    with tempfile.TemporaryDirectory() as folder:
        plans = {}
        for n in sizes:
            plans[n] = Path(folder) / f"plan_{n}.yaml"
            plans[n].write_text(make_plan(n))
        run(plans[sizes[0]], args.format)  # warm the file cache and bytecode
        results, before = {}, {}
        for n in sizes:
            results[n] = run(plans[n], args.format)
            if args.base:
                before[n] = run(plans[n], args.format, args.base)
    base_wall, base_cpu, base_rss = results[sizes[0]]
    print(f"kvplan check --format {args.format}, scenarios with require_fit_on (one run each, same session)")
    print(f"{'scenarios':>10} {'wall s':>8} {'x one':>7} {'CPU s':>7} {'x one':>7} {'ms/scenario':>12} {'peak MB':>8} "
          f"{'+MB':>6}")
    for n in sizes:
        wall, cpu, rss = results[n]
        per = (cpu - base_cpu) / (n - sizes[0]) * 1000 if n > sizes[0] else float("nan")
        print(f"{n:>10,} {wall:>8.2f} {wall / base_wall:>7.1f} {cpu:>7.2f} {cpu / base_cpu:>7.1f} {per:>12.2f} "
              f"{rss:>8.1f} {rss - base_rss:>6.1f}")
    if before:
        print(f"--base {args.base} (same plans, interleaved):")
        for n in sizes:
            wall, cpu, rss = before[n]
            print(f"{n:>10,} {wall:>8.2f} {wall / before[sizes[0]][0]:>7.1f} {cpu:>7.2f} {cpu / before[sizes[0]][1]:>7.1f} "
                  f"{'':>12} {rss:>8.1f} {rss - before[sizes[0]][2]:>6.1f}   this tree: {results[n][0] / wall:.2f}x "
                  f"its wall time, {results[n][1] / cpu:.2f}x its CPU time")
    if 1000 in results:
        ratio, cpu_ratio = results[1000][0] / base_wall, results[1000][1] / base_cpu
        print(f"1,000 scenarios: {ratio:.1f}x one scenario's wall time, {cpu_ratio:.1f}x its CPU time (target <= 3x) "
              f"{'OK' if ratio <= 3 else 'OVER'}")
    if 10000 in results:
        growth = results[10000][2] - base_rss
        print(f"memory growth 1 -> 10,000: {growth:.1f} MB (target < 50 MB) {'OK' if growth < 50 else 'OVER'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
