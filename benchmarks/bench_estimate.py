"""Start-up: `kvplan estimate` (a table) against the floor of its stack, a bare typer command that prints a
three-row rich table, measured side by side in one run (interleaved, so load on the machine hits both alike).

Target: kvplan's median wall time at most 1.15x the floor's. Both freeze the heap at exit (``gc.freeze()``)
as kvplan's ``main`` does, so the interpreter's collection at exit skips it; the floor is timed without that
too, to show what it is worth.

    python benchmarks/bench_estimate.py [--runs 21]
    python benchmarks/bench_estimate.py --instructions   # the same ratio in instructions (valgrind), load-free

On a busy machine wall and CPU times move by tens of percent; the instructions each command executes
(valgrind's callgrind, about 30 s) do not, so a change is measured there first and confirmed in time.
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 1.15

FLOOR = """
import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer()


@app.command()
def estimate(model: str = typer.Option(...), seq_len: str = typer.Option("4k")) -> None:
    table = Table(title=model)
    for column in ("kind", "layers", "bytes"):
        table.add_column(column)
    table.add_row("full_attention", "16", "2.00 GiB")
    table.add_row("sliding_window", "16", "256.00 MiB")
    table.add_row("total", "32", "2.25 GiB")
    Console().print(table)


@app.command()
def other() -> None: ...
"""
RUN = 'app(["estimate", "--model", "m", "--seq-len", "32k"])\n'
FROZEN_RUN = f"import gc\n\ntry:\n    {RUN}finally:\n    gc.freeze()\n"

COMMANDS = {
    "typer command + rich table (floor)": [sys.executable, "-c", FLOOR + FROZEN_RUN],
    "  the same without gc.freeze()": [sys.executable, "-c", FLOOR + RUN],
    "kvplan estimate (table)": [sys.executable, "-m", "kvplan", "estimate", "--model", "meta-llama/Llama-3.1-8B",
                                "--seq-len", "32k", "--batch", "4"],
}

#: This source tree (``python -m`` puts the working folder first on sys.path, so every run starts outside
#: the tree and takes kvplan from PYTHONPATH).
ROOT = Path(__file__).resolve().parents[1]


def seconds(cmd: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of ``cmd``."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tempfile.gettempdir(),
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{cmd} failed")
    return wall, usage.ru_utime + usage.ru_stime


def instructions(cmd: list[str]) -> int:
    """Instructions one run of ``cmd`` executes (valgrind --tool=callgrind; string hashing fixed)."""
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tempfile.gettempdir(),
                          env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0"}, check=True)
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if found is None:
        raise SystemExit(f"no instruction count from valgrind for {cmd}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--instructions", action="store_true", help="count instructions (valgrind) instead of time")
    args = parser.parse_args()
    # NOTE: an installed wheel has bytecode (pip compiles it); compile the checkout once so no run pays for it.
    compileall.compile_dir(str(ROOT / "kvplan"), quiet=1)
    if args.instructions:
        if shutil.which("valgrind") is None:
            raise SystemExit("--instructions needs valgrind")
        counts = {name: instructions(cmd) for name, cmd in COMMANDS.items()}
        floor = counts["typer command + rich table (floor)"]
        for name, count in counts.items():
            print(f"{name:<36} {count / 1e6:7.1f} M instructions {count / floor:5.2f}x")
        return 0
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    for cmd in COMMANDS.values():
        seconds(cmd)  # warm the file cache
    for _ in range(args.runs):
        for name, cmd in COMMANDS.items():
            times[name].append(seconds(cmd))
    floor_wall = statistics.median(wall for wall, _cpu in times["typer command + rich table (floor)"])
    floor_cpu = statistics.median(cpu for _wall, cpu in times["typer command + rich table (floor)"])
    for name, values in times.items():
        wall = statistics.median(w for w, _c in values)
        cpu = statistics.median(c for _w, c in values)
        print(f"{name:<36} wall {wall * 1000:6.1f} ms {wall / floor_wall:5.2f}x   CPU {cpu * 1000:6.1f} ms "
              f"{cpu / floor_cpu:5.2f}x")
    ratio = statistics.median(w for w, _c in times["kvplan estimate (table)"]) / floor_wall
    print(f"kvplan estimate / floor: {ratio:.2f}x wall (medians of {args.runs}; target <= {TARGET}x) "
          f"{'OK' if ratio <= TARGET else 'OVER'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
