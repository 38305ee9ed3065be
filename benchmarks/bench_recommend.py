"""`kvplan.recommend` over the whole GPU catalog for one model: every GPU type x layout x engine x KV dtype
priced by capacity's code (thousands of candidates), then the best of each sized in full and the report built.

Target: well under a second of CPU per search (the first, cold one included: weights counted, modules imported).

    python benchmarks/bench_recommend.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

MODELS = ("meta-llama/Llama-3.1-70B", "deepseek-ai/DeepSeek-V3", "google/gemma-3-27b-it")
ENGINES = ("vllm", "sglang", "trtllm", "llama.cpp")


def search(model: object) -> tuple[int, float, float]:
    """(candidates priced, CPU seconds, wall seconds) of one search and its report."""
    import kvplan

    cpu, wall = time.process_time(), time.perf_counter()
    result = kvplan.recommend(model, max_model_len=32000, concurrency=64, gpu="all", engine=ENGINES, top=0)  # type: ignore[arg-type]
    report = result.to_dict()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert report["deployments"]
    return result.candidates, cpu, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    import kvplan

    print(f"{'model':32} {'candidates':>10} {'cold CPU s':>10} {'CPU s (median)':>15} {'wall s (median)':>16}")
    for name in MODELS:
        geometry = kvplan.load_geometry(name)
        count, cold_cpu, _cold_wall = search(geometry)
        runs = [search(geometry) for _ in range(args.runs)]
        cpu = statistics.median(r[1] for r in runs)
        wall = statistics.median(r[2] for r in runs)
        print(f"{name:32} {count:>10,} {cold_cpu:>10.3f} {cpu:>15.3f} {wall:>16.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
