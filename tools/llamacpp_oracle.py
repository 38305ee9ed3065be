"""Write docs/llamacpp-oracle.md: kvplan's llama.cpp profile against the real llama.cpp, per GGUF architecture.

    python tools/llamacpp_oracle.py            # runs the oracle (tests/llamacpp_oracle.py), rewrites the page
    python tools/llamacpp_oracle.py --check    # exit 1 when the page is not what the oracle gives now

Needs llama-cpp-python 0.3.36 and gguf (pip install '.[llamacpp]'); about five minutes on 2 cores.
tests/test_verify_llamacpp_oracle.py checks the page's table with the same runs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from llamacpp_oracle import (  # noqa: E402
    CASES,
    CONFIG_FLAGS,
    CONFIG_MODELS,
    MODELS,
    CaseOutcome,
    ConfigOutcome,
    config_table,
    refused_config_types,
    run_all,
    run_config,
    run_shared_configs,
    table,
)

PAGE = ROOT / "docs" / "llamacpp-oracle.md"

INTRO = """\
# kvplan and the real llama.cpp

`kvplan verify --engine llama.cpp` hands a GGUF and your llama.cpp flags to the real llama.cpp
(llama-cpp-python {version}), lets it create the context, and compares every cache it makes (the base
K/V cache, the sliding-window cache, the recurrent states; DeepSeek-V4's compressed and indexer caches and
its compressor states) with kvplan's llama.cpp profile:

```
kvplan verify --engine llama.cpp -m model-Q4_K_M.gguf -c 32768 -np 4 -ctk q8_0 -ctv q8_0 -fa on
kvplan verify --engine llama.cpp -m google/gemma-3-12b-it -c 8192 --measure tensors
```

`--model` is a GGUF file, `org/repo:QUANT` on the Hub (its header only is fetched), or anything else
kvplan reads (a config.json, a bundled model, a Hub id): kvplan then writes a small GGUF in the llama.cpp
architecture the converter (`convert_hf_to_gguf.py`) would pick, with the cache geometry parsed from the
config. Install with `pip install '.[llamacpp]'`; without llama-cpp-python the command exits 2 and says so.

What is compared, by `--measure`:

| `--measure` | llama.cpp does | compared |
|---|---|---|
| `log` (default) | its dry run (`no_alloc`, as its memory-fit pass): the model from the GGUF header, nothing allocated | each cache's cells, layers, sequences, streams and types; K, V and size in MiB as llama.cpp prints them (0.01 MiB) |
| `buffers` | loads the model (mmap) and allocates the caches | the above and each cache's `KV buffer size` line |
| `tensors` | the above and a one-token decode | the bytes of every cache tensor and buffer, read from ggml: to the byte (DeepSeek-V4's window, compressed and indexer caches name a layer's tensors alike, `cache_k_l<il>`: those by their log and buffer lines) |

The exit code is 0 when every cache matches, 1 when one does not (the report names the figure), 2 for bad
input (and llama-cpp-python missing).

## The oracle

Each row is a tiny GGUF of one architecture (a few layers, head size 32, random weights; llama.cpp
creates and names the tensors from the metadata), run through the {cases} cases below with
`--measure tensors`: llama.cpp's bytes against kvplan's, cache by cache. A row marked *dry run* is
compared with `--measure log` (the metadata alone; cells, layers, sequences, types and MiB) because
llama.cpp's model saver cannot name that architecture's weights (it refuses gemma3n, bitnet and apertus
and leaves out a gemma4 tensor). Every GGUF architecture kvplan reads has a row; the ones it refuses
say why (`kvplan/gguf/archs.py`). The tests run the same oracle
(`tests/test_verify_llamacpp_oracle.py`; a miss not listed fails, and so does a listed one that now
matches). This page is written by `python tools/llamacpp_oracle.py`.

"""

CASES_TEXT = """
Cases (llama.cpp flags; `-c` and `-np` as llama-server takes them, f16 caches and `-fa auto` unless said):

{cases}

The last case is one llama.cpp refuses (a quantised V cache needs flash attention); kvplan expects the
refusal, so it passes for every architecture.

## config.json models

For a config.json, kvplan writes the GGUF llama.cpp's converter would (its architecture, which decides
llama.cpp's rules: Mistral is written as `llama`, which has no sliding window) with the cache geometry
parsed from the config, and llama.cpp's dry run makes the caches. One bundled model per model_type (and
real Hub configs of the model_types no bundled model has), at `-c {ctx} -np {np}`:

{configs}

A model_type llama.cpp's converter writes with an architecture kvplan's GGUF reader does not model is
refused (exit 2, naming the architecture and its rule), as is one kvplan cannot map; bundled models refused:

{refused}

## Real models

`tests/test_verify_llamacpp.py` also runs the GGUF headers llama.cpp's converter wrote for real models
(the vocabulary files of llama.cpp's repository, `models/ggml-vocab-*.gguf`: Meta-Llama-3-8B, Phi-3-mini,
Command-R, StarCoder2, Gemma 4 26B-A4B with its two caches) through the dry run. The dry run needs the
header only, so a 400 GB model costs what a 1 GB one does.
"""


def page(results: dict[str, list[CaseOutcome]], configs: list[ConfigOutcome], version: str) -> str:
    cases = "\n".join(f"- `{label}`" for label, _flags in CASES)
    refused = "\n".join(refused_rows())
    return (INTRO.format(version=version, cases=len(CASES)) + "\n".join(table(results)) + "\n"
            + CASES_TEXT.format(cases=cases, configs="\n".join(config_table(configs)), ctx=CONFIG_FLAGS["ctx_size"],
                                np=CONFIG_FLAGS["parallel"], refused=refused))


def refused_rows() -> list[str]:
    rows = ["| model_type | bundled models | why |", "|---|---|---|"]
    for model_type, models, why in refused_config_types():
        rows.append(f"| `{model_type}` | {', '.join(models)} | {why.split(': ', 1)[-1]} |")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the page instead of writing it")
    args = parser.parse_args()
    import llama_cpp

    with tempfile.TemporaryDirectory(prefix="kvplan-oracle-") as tmp:
        results = run_all(Path(tmp))
    configs = [run_config(model) for model in CONFIG_MODELS] + run_shared_configs()
    if len(configs) == len(CONFIG_MODELS):
        print("../shared/hf_configs is not beside the checkout: the page would lose its shared config rows",
              file=sys.stderr)
        return 2
    text = page(results, configs, llama_cpp.__version__)
    exact = sum(o.passed for outcomes in results.values() for o in outcomes)
    total = sum(len(outcomes) for outcomes in results.values())
    print(f"{len(MODELS)} tiny models of {len({m.arch for m in MODELS})} architectures, {total} cases, "
          f"kvplan = llama.cpp in {exact}")
    if args.check:
        same = PAGE.exists() and PAGE.read_text(encoding="utf-8") == text
        print(f"{PAGE.relative_to(ROOT)} is {'current' if same else 'STALE'}")
        return 0 if same else 1
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
