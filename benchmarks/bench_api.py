"""Python API throughput: `kvplan.estimate` calls per second on a loaded geometry, against one
`kvplan estimate` process start-up measured in the same run.

Target: 1,000 API estimates take less time than one process start-up.

    python benchmarks/bench_api.py [--calls 1000] [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

MODEL = "meta-llama/Llama-3.1-8B"
CLI = [sys.executable, "-m", "kvplan", "estimate", "--model", MODEL, "--seq-len", "32k", "--batch", "4"]


def startup_seconds(runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(CLI, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def api_seconds(calls: int) -> tuple[float, float]:
    """(seconds for ``calls`` estimates over a sweep of lengths, batches, engines and TP; and with
    ``.to_dict()``, the report, for each). Every call asks a different length (``+ i``)."""
    import kvplan

    geometry = kvplan.load_geometry(MODEL)
    sweep = [(engine, tp, batch, tokens) for engine in ("ideal", "vllm", "sglang", "trtllm") for tp in (1, 2, 4)
             for batch in (1, 8, 32) for tokens in (4096, 32768, 131072)]
    total = 0
    start = time.perf_counter()
    for i in range(calls):
        engine, tp, batch, tokens = sweep[i % len(sweep)]
        total += kvplan.estimate(geometry, seq_len=tokens + i, batch=batch, engine=engine,
                                 tp=tp).kv_cache_bytes_per_gpu
    plain = time.perf_counter() - start
    assert total > 0
    start = time.perf_counter()
    for i in range(calls):
        engine, tp, batch, tokens = sweep[i % len(sweep)]
        kvplan.estimate(geometry, seq_len=tokens + calls + i, batch=batch, engine=engine, tp=tp).to_dict()
    return plain, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    # NOTE: an installed wheel has bytecode (pip compiles it); a source checkout run with
    # PYTHONDONTWRITEBYTECODE=1 would recompile every changed module on every start, so compile once here.
    import compileall
    from pathlib import Path

    compileall.compile_dir(str(Path(__file__).resolve().parents[1] / "kvplan"), quiet=1)
    startup_seconds(1)  # warm the file cache
    startup = startup_seconds(args.runs)
    plain, with_report = api_seconds(args.calls)
    print(f"one `kvplan estimate` process        : {startup * 1000:8.1f} ms (median of {args.runs})")
    print(f"{args.calls:,} kvplan.estimate(geometry, ...)  : {plain * 1000:8.1f} ms "
          f"({args.calls / plain:,.0f}/s, {plain / args.calls * 1e6:.0f} us each)")
    print(f"{args.calls:,} of them with .to_dict()         : {with_report * 1000:8.1f} ms "
          f"({args.calls / with_report:,.0f}/s)")
    ratio = plain / startup
    print(f"{args.calls:,} API estimates / one start-up     : {ratio:8.2f}x (target < 1) {'OK' if ratio < 1 else 'OVER'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
