"""Start-up benchmark: median wall time of `kvplan estimate` on a bundled model (table and yaml
output), against the bare import of its CLI stack (`python -c "import typer, rich, yaml"`), all
measured in the same run, interleaved.

Target: ratio <= 1.2 for both. Run: python benchmarks/bench_estimate.py [--runs 15]
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
TARGET = 1.2


def seconds(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def median_seconds(commands: dict[str, list[str]], runs: int) -> dict[str, float]:
    """Median of ``runs`` runs of each command, run in turn (load on the machine hits them alike)."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, cmd in commands.items():
            times[name].append(seconds(cmd))
    return {name: statistics.median(values) for name, values in times.items()}


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
    commands = {"import typer, rich, yaml": BASELINE, "kvplan estimate (table)": ESTIMATE,
                "kvplan estimate --format yaml": [*ESTIMATE, "--format", "yaml"]}
    median_seconds(commands, 1)  # warm the file cache
    medians = median_seconds(commands, args.runs)
    floor = medians["import typer, rich, yaml"]
    for name, value in medians.items():
        ratio = value / floor
        verdict = "" if name.startswith("import") else f" {ratio:5.2f}x (target <= {TARGET}x) {'OK' if ratio <= TARGET else 'OVER'}"
        print(f"{name:<30}: {value * 1000:7.1f} ms (median of {args.runs}){verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
