"""llama.cpp's launch line: ``llama-server -m F.gguf ...`` or ``llama-cli ...`` (any path to them).

Flags as ``common/arg.cpp`` reads them (llama.cpp vendored by llama-cpp-python 0.3.36): ``-c`` with
``std::stoi`` (no ``k`` suffix), ``-np`` (llama-server's default ``-1`` = auto: 4 slots and a unified cache,
``tools/server/server.cpp``), ``-ngl N|auto|all``, ``-fa on|off|auto`` (``is_truthy``/``is_falsey``/``is_autoy``),
``-nkvo``/``-kvo``, ``-kvu``/``-no-kvu``, ``-ctk``/``-ctv``, ``-ub``, ``--swa-full``, ``-ts``; ``-hf org/repo:QUANT``
and ``-hff FILE`` name a Hub GGUF.
"""

from __future__ import annotations

from kvplan.engine_flags import FLASH_ATTN_WORDS, flash_attn_value
from kvplan.errors import InputError
from kvplan.launch.shell import Flag, Keywords, to_int

ENGINE = "llama.cpp"
#: llama-server's -np auto (tools/server/server.cpp): 4 slots sharing one unified KV pool.
SERVER_AUTO_SLOTS = 4

def _ngl(value: str | None) -> Keywords:
    text = str(value).strip().lower()
    if text in ("auto", "all"):
        return {}  # every layer on the GPU: kvplan's default
    number = to_int("-ngl", minimum=-100)(text)
    return {} if number < 0 else {"n_gpu_layers": number}  # -1 auto, <= -2 all (common.h)


def _parallel(value: str | None) -> Keywords:
    number = to_int("-np", minimum=-1)(value)
    if number == 0:
        raise InputError("-np 0: llama.cpp refuses it ('invalid value for n_parallel')", "e.g. -np 4")
    return {"parallel": number}


FLAGS: tuple[Flag, ...] = (
    Flag(names=("-m", "--model"), read=lambda v: {"model": v}),
    Flag(names=("-hf", "-hfr", "--hf-repo"), read=lambda v: {"model": v}),
    Flag(names=("-hff", "--hf-file"), read=lambda v: {"gguf_file": v}),
    Flag(names=("-c", "--ctx-size"), read=lambda v: {"ctx_size": str(v).strip()}),
    Flag(names=("-np", "--parallel"), read=_parallel),
    Flag(names=("-ngl", "--gpu-layers", "--n-gpu-layers"), read=_ngl),
    Flag(names=("-nkvo", "--no-kv-offload"), read=lambda _v: {"no_kv_offload": True}, takes_value=False),
    Flag(names=("-kvo", "--kv-offload"), read=lambda _v: {"no_kv_offload": False}, takes_value=False),
    Flag(names=("-fa", "--flash-attn"), read=lambda v: {"flash_attn": flash_attn_value(v)}, takes_value=False,
         optional_value=FLASH_ATTN_WORDS),
    Flag(names=("-ctk", "--cache-type-k"), read=lambda v: {"cache_type_k": v}),
    Flag(names=("-ctv", "--cache-type-v"), read=lambda v: {"cache_type_v": v}),
    Flag(names=("-kvu", "--kv-unified"), read=lambda _v: {"kv_unified": True}, takes_value=False),
    Flag(names=("-no-kvu", "--no-kv-unified"), read=lambda _v: {"kv_unified": False}, takes_value=False),
    Flag(names=("-ub", "--ubatch-size"), read=lambda v: {"ubatch_size": to_int("-ub", minimum=1)(v)}),
    Flag(names=("--swa-full",), read=lambda _v: {"no_window": True}, takes_value=False),
    # NOTE: llama.cpp splits layers over the devices -ts names (its default split mode, layer): kvplan's --pp.
    Flag(names=("-ts", "--tensor-split"), read=lambda v: {"tensor_split": v, "pp": _devices(v)}),
)

def _devices(text: str | None) -> int:
    """The devices a -ts list names (its entries; a trailing zero share is a device that holds no layer)."""
    return max(1, len([part for part in (text or "").replace("/", ",").split(",") if part.strip()]))


#: llama.cpp's switches kvplan does not size.
SWITCHES = frozenset({
    "--jinja", "--mlock", "--no-mmap", "-v", "--verbose", "-cb", "--cont-batching", "-nocb", "--no-cont-batching",
    "--no-webui", "--metrics", "--embedding", "--embeddings", "--reranking", "--rerank", "--no-warmup", "--props",
    "--slots", "--no-slots", "-cnv", "--conversation", "-no-cnv", "--no-conversation", "-i", "--interactive",
    "--log-disable", "--context-shift", "--no-context-shift", "--no-perf", "--perf", "-st", "--single-turn",
    "--cache-idle-slots", "--no-cache-idle-slots", "--repack", "-nr", "--no-repack", "--check-tensors",
    "-sp", "--special", "--verbose-prompt", "--offline", "-e", "--escape", "--no-escape", "--simple-io",
})


def program_words(argv: list[str]) -> tuple[str, list[str]] | None:
    """(program, the words after it) for ``llama-server`` and ``llama-cli`` (any path), else None."""
    name = argv[0].rsplit("/", 1)[-1]
    if name in ("llama-server", "llama-cli", "llama-server.exe", "llama-cli.exe"):
        return name.removesuffix(".exe"), argv[1:]
    return None
