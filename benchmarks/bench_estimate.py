"""Startup benchmark: median wall time of `kvplan estimate` on a bundled model, against the bare
import of its CLI stack (`python -c "import typer, rich, yaml"`) measured in the same run.

Target: ratio <= 1.3. Run: python benchmarks/bench_estimate.py [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

BASELINE = [sys.executable, "-c", "import typer, rich, yaml"]
ESTIMATE = [sys.executable, "-m", "kvplan", "estimate", "--model", "meta-llama/Llama-3.1-8B", "--seq-len", "32k",
            "--batch", "4"]
TARGET = 1.3


def median_seconds(cmd: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    # NOTE: an installed wheel has bytecode (pip compiles it); a source checkout run with
    # PYTHONDONTWRITEBYTECODE=1 would recompile kvplan on every start, so compile it once here.
    import compileall
    import os

    import kvplan

    compileall.compile_dir(os.path.dirname(kvplan.__file__), quiet=1)
    median_seconds(ESTIMATE, 2)  # warm the file cache
    baseline = median_seconds(BASELINE, args.runs)
    estimate = median_seconds(ESTIMATE, args.runs)
    ratio = estimate / baseline
    print(f"import typer, rich, yaml : {baseline * 1000:7.1f} ms (median of {args.runs})")
    print(f"kvplan estimate          : {estimate * 1000:7.1f} ms (median of {args.runs})")
    print(f"ratio                    : {ratio:7.2f}x (target <= {TARGET}x) {'OK' if ratio <= TARGET else 'OVER'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
