"""Start-up benchmark: median wall time of `kvplan estimate` on a bundled model (table and yaml
output), against the bare import of its CLI stack (`python -c "import typer, rich, yaml"`), all
measured in the same run, interleaved; and the median CPU time (user + system, steadier on a loaded
machine) of each, against the floor's.

Target: ratio <= 1.2 for both. Two reference lines time a bare typer command (no kvplan) printing a rich
table, and printing one plain line: what the CLI stack itself costs above the floor. Like kvplan's
``main``, they freeze the heap (``gc.freeze()``) so the interpreter's collection at exit skips it; one
more line times the floor doing the same, to show what that alone saves. Run: python benchmarks/bench_estimate.py [--runs 15] [--base DIR]
(``--base DIR``: also time an older kvplan source tree, e.g. ``git archive <commit> | tar -x -C DIR``,
interleaved with this one.)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASELINE = [sys.executable, "-c", "import typer, rich, yaml"]
#: A reference, not a target: the least a typer command that prints a rich table costs (the floor's imports,
#: typer building and parsing one command with two options, rich's console and table), no kvplan at all.
STACK = [sys.executable, "-c", """
import typer, rich, yaml
app = typer.Typer()
@app.command()
def estimate(model: str = typer.Option(...), seq_len: str = typer.Option("4k")) -> None:
    from rich.console import Console
    from rich.table import Table
    table = Table(title=model)
    for column in ("kind", "layers", "size"):
        table.add_column(column)
    table.add_row("full_attention", "32", "4.00 GiB")
    Console().print(table)
@app.command()
def other() -> None: ...
import gc
gc.freeze()  # as kvplan's main does: the interpreter's collection at exit skips what is alive
try:
    app(["estimate", "--model", "m", "--seq-len", "32k"])
finally:
    gc.freeze()
"""]
#: The floor with the exit-time collection skipped the same way (information: what that saving is worth).
FLOOR_FROZEN = [sys.executable, "-c", "import typer, rich, yaml, gc; gc.freeze()"]
#: The same command printing one plain line (what a YAML report needs of the stack: no rich console).
STACK_PLAIN = [sys.executable, "-c", STACK[2].replace("""    from rich.console import Console
    from rich.table import Table
    table = Table(title=model)
    for column in ("kind", "layers", "size"):
        table.add_column(column)
    table.add_row("full_attention", "32", "4.00 GiB")
    Console().print(table)""", """    typer.echo(f"model: {model}")""")]
assert STACK_PLAIN[2] != STACK[2]
ESTIMATE = [sys.executable, "-m", "kvplan", "estimate", "--model", "meta-llama/Llama-3.1-8B", "--seq-len", "32k",
            "--batch", "4"]
TARGET = 1.2


#: This source tree (``python -m`` takes kvplan from PYTHONPATH).
ROOT = str(Path(__file__).resolve().parents[1])


def seconds(cmd: list[str], source: str | None = None) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of ``cmd`` (kvplan from ``source`` when given, else this tree)."""
    env = {**os.environ, "PYTHONPATH": source or ROOT}
    start = time.perf_counter()
    # NOTE: ``python -m`` puts the working folder first on sys.path: run outside any source tree, so the
    # tree comes from PYTHONPATH alone
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tempfile.gettempdir())
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{cmd} failed")
    return wall, usage.ru_utime + usage.ru_stime


def median_seconds(commands: dict[str, tuple[list[str], str | None]], runs: int) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) of ``runs`` runs of each command, run in turn (load on the machine hits them alike)."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, (cmd, source) in commands.items():
            times[name].append(seconds(cmd, source))
    return {name: (statistics.median(w for w, _c in values), statistics.median(c for _w, c in values))
            for name, values in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--base", default=None, help="an older kvplan source tree to time beside this one")
    args = parser.parse_args()
    # NOTE: an installed wheel has bytecode (pip compiles it); a source checkout run with
    # PYTHONDONTWRITEBYTECODE=1 would recompile kvplan on every start, so compile it once here.
    import compileall

    for tree in (ROOT, args.base):
        if tree:
            compileall.compile_dir(os.path.join(tree, "kvplan"), quiet=1)
    commands: dict[str, tuple[list[str], str | None]] = {
        "import typer, rich, yaml": (BASELINE, None), "  ... then gc.freeze()": (FLOOR_FROZEN, None),
        "typer command + rich table": (STACK, None),
        "typer command, plain line": (STACK_PLAIN, None),
        "kvplan estimate (table)": (ESTIMATE, None),
        "kvplan estimate --format yaml": ([*ESTIMATE, "--format", "yaml"], None)}
    if args.base:
        commands["before: estimate (table)"] = (ESTIMATE, args.base)
        commands["before: estimate --format yaml"] = ([*ESTIMATE, "--format", "yaml"], args.base)
    median_seconds(commands, 1)  # warm the file cache
    medians = median_seconds(commands, args.runs)
    floor, floor_cpu = medians["import typer, rich, yaml"]
    for name, (value, cpu) in medians.items():
        ratio = value / floor
        verdict = "" if name.startswith(("import", "before", "typer", " ")) else \
            f" (target <= {TARGET}x) {'OK' if ratio <= TARGET else 'OVER'}"
        print(f"{name:<31}: wall {value * 1000:7.1f} ms {ratio:5.2f}x, CPU {cpu * 1000:7.1f} ms {cpu / floor_cpu:5.2f}x "
              f"(medians of {args.runs}){verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
