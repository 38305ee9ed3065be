"""``--cmd``: an engine's whole launch line, read as that engine reads it, as keywords of kvplan's API.

:func:`read_launch` takes the text a user pastes (``vllm serve MODEL --max-model-len 32k -tp 2``,
``python -m sglang.launch_server --model-path MODEL ...``, ``llama-server -m F.gguf -c 8192 -np 2 -fa on``,
``trtllm-serve MODEL ...``) and names the engine, the model and, for every flag that changes memory, the
keyword of :func:`kvplan.capacity` / :func:`kvplan.estimate` with the engine's own reading of its value
(one module per engine: :mod:`.vllm`, :mod:`.sglang`, :mod:`.llamacpp`, :mod:`.trtllm`). The rest of the line is
accepted and named once, in one note, as not sized. :func:`merge` puts kvplan's own options beside it: an
option the line also sets must agree with it (else :class:`~kvplan.errors.InputError`, exit 2). Pure.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from kvplan.engines import get_engine
from kvplan.errors import InputError
from kvplan.launch import llamacpp, sglang, trtllm, vllm
from kvplan.launch.shell import read_flags, split_line

__all__ = ["KEYWORDS", "Launch", "merge", "read_launch"]

#: Every API keyword a launch line can set (the `kvplan recommend` round trip names these).
KEYWORDS = (
    "engine", "model", "revision", "gguf_file", "tp", "pp", "dp", "max_model_len", "batch", "kv_dtype",
    "cache_type_k", "cache_type_v", "block_size", "gpu_memory_utilization", "mem_fraction_static",
    "free_gpu_memory_fraction", "kv_budget", "max_num_seqs", "max_num_batched_tokens", "dtype", "quantization",
    "cpu_offload_gb", "enforce_eager", "enable_prefix_caching", "enable_dp_attention", "no_window",
    "swa_full_tokens_ratio", "ctx_size", "parallel", "n_gpu_layers", "no_kv_offload", "flash_attn", "kv_unified",
    "ubatch_size", "tensor_split",
)
_TITLES = {"vllm": "vLLM", "sglang": "SGLang", "llama.cpp": "llama.cpp", "trtllm": "TensorRT-LLM"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Launch:
    """A launch line read: its engine, its model and the API keywords its flags set."""

    engine: str
    program: str
    model: str | None
    keywords: dict[str, Any] = field(default_factory=dict)
    """API keyword -> value (``engine`` and ``model`` included)."""
    given: dict[str, str] = field(default_factory=dict)
    """API keyword -> the words of the line that set it (``-tp 2``), for messages and notes."""
    ignored: tuple[str, ...] = ()
    defaults: tuple[str, ...] = ()
    """Flags read whose value is kvplan's default (``--max-model-len auto``: the model's maximum)."""
    notes: tuple[str, ...] = ()

    def summary(self, unused: Collection[str] = ()) -> str:
        """The one note that says how the line was read."""
        read = [self.given[k] for k in self.given if k not in ("model", "engine") and k not in unused]
        text = f"--cmd read as {_TITLES[self.engine]} ({self.program}), model {self.model}"
        if read:
            text += "; sized: " + ", ".join(read)
        if self.defaults:
            text += "; as kvplan's default: " + ", ".join(self.defaults)
        if self.ignored:
            text += "; not sized (no effect on memory in kvplan): " + ", ".join(self.ignored)
        if unused:
            text += "; not read by this command: " + ", ".join(self.given[k] for k in unused)
        return text


def read_launch(text: str) -> Launch:
    """The launch line ``text`` as :class:`Launch`; InputError for a line kvplan cannot read."""
    env, argv = split_line(text)
    program, engine, words, module = _program(argv)
    flags = read_flags(words, module.FLAGS, switches=module.SWITCHES, engine=_TITLES[engine])
    keywords, given, notes = dict(flags.keywords), dict(flags.given), []
    positional = list(flags.positional)
    if "model" not in keywords and positional and engine in ("vllm", "trtllm"):
        keywords["model"] = positional.pop(0)
        given["model"] = keywords["model"]
    ignored = list(flags.ignored) + [f"argument {word!r}" for word in positional]
    ignored += [f"{name}=" for name in env]
    if engine == "llama.cpp":
        notes += _llama_defaults(program.split(" (docker ")[0], keywords, given)
    model = keywords.get("model")
    if model is None:
        flag = {"vllm": "MODEL (vllm serve MODEL) or --model", "sglang": "--model-path",
                "llama.cpp": "-m FILE.gguf or -hf org/repo:QUANT", "trtllm": "MODEL (trtllm-serve MODEL)"}[engine]
        raise InputError(f"--cmd: the {_TITLES[engine]} line names no model", f"add {flag} to the line")
    keywords["engine"] = engine
    return Launch(engine=engine, program=program, model=str(model), keywords=keywords, given=given,
                  ignored=tuple(ignored), defaults=tuple(flags.defaults), notes=tuple(notes))


#: Container images whose entrypoint is the engine's server: image name part -> (engine module, program).
_IMAGES = (("vllm/vllm-openai", vllm, "vllm serve"), ("llama.cpp:server", llamacpp, "llama-server"),
           ("llama.cpp:light", llamacpp, "llama-cli"))


def _program(argv: list[str]) -> tuple[str, str, list[str], Any]:
    if argv[0].rsplit("/", 1)[-1] in ("docker", "podman"):
        return _container(argv)
    return _program_at(argv)


def _container(argv: list[str]) -> tuple[str, str, list[str], Any]:
    """``docker run ... IMAGE [ARGS]``: an engine image's entrypoint (vllm/vllm-openai, llama.cpp's server and
    light images) takes ARGS as its flags; another image runs the command it is given."""
    for i, word in enumerate(argv):
        for part, module, program in _IMAGES:
            if part in word:
                return f"{program} (docker {word})", module.ENGINE, argv[i + 1:], module
    for i in range(1, len(argv)):
        try:
            return _program_at(argv[i:])
        except InputError:
            continue
    raise InputError("--cmd: no engine found in the docker line",
                     "kvplan reads the vllm/vllm-openai and llama.cpp server images, or an engine command given to "
                     "the image (python3 -m sglang.launch_server ..., trtllm-serve ...)")


def _program_at(argv: list[str]) -> tuple[str, str, list[str], Any]:
    found = llamacpp.program_words(argv)
    if found is not None:
        return found[0], llamacpp.ENGINE, found[1], llamacpp
    for module, program in ((vllm, "vllm serve"), (sglang, "sglang.launch_server"), (trtllm, "trtllm-serve")):
        words = module.program_words(argv)
        if words is not None:
            shown = " ".join(argv[: len(argv) - len(words)]) if module is not trtllm else program
            return shown, module.ENGINE, words, module
    head = " ".join(argv[:3])
    hint = "kvplan reads: vllm serve MODEL, python -m vllm.entrypoints.openai.api_server --model MODEL, "\
           "python -m sglang.launch_server --model-path MODEL, llama-server -m F.gguf, llama-cli -m F.gguf, "\
           "trtllm-serve MODEL"
    if argv[0].rsplit("/", 1)[-1] == "ollama":
        hint = "Ollama runs llama.cpp: use --engine ollama (read as llama.cpp) with the model's GGUF, -c and -np"
    raise InputError(f"--cmd: {head!r} is not a launch line kvplan reads", hint)


def _llama_defaults(program: str, keywords: dict[str, Any], given: dict[str, str]) -> list[str]:
    """llama.cpp's own defaults where the line is silent: -np (llama-server: auto, 4 slots unified)
    and -c 0 (the model's trained context, over all slots: common.h n_ctx = 0)."""
    notes = []
    parallel = keywords.get("parallel")
    if program == "llama-server" and parallel in (None, -1):
        keywords["parallel"] = llamacpp.SERVER_AUTO_SLOTS
        keywords.setdefault("kv_unified", True)
        notes.append(f"llama-server -np auto: {llamacpp.SERVER_AUTO_SLOTS} slots sharing one unified KV cache "
                     "(tools/server/server.cpp)")
    elif parallel == -1:
        keywords["parallel"] = 1
    if "ctx_size" not in keywords:
        keywords["ctx_size"] = "0"
        given.setdefault("ctx_size", "-c 0 (llama.cpp's default: the model's trained context)")
    return notes


def merge(launch: Launch, explicit: Mapping[str, Any], accepted: Collection[str]) -> tuple[dict[str, Any], list[str]]:
    """The API keywords of ``launch`` with kvplan's ``explicit`` options beside them, and the notes.

    An option the line also sets must name the same value (kvplan's ``--tp 2`` beside the line's ``-tp 2``);
    a different one is refused (InputError: exit 2). Keywords the command does not take (``accepted``) are
    named as not sized."""
    merged = dict(explicit)
    unused = []
    for key, value in launch.keywords.items():
        if key not in accepted:
            unused.append(key)
            continue
        if key in explicit and not _same(key, explicit[key], value):
            flag = "--" + key.replace("_", "-")
            theirs = launch.given.get(key, f"{launch.engine}")
            raise InputError(f"{flag} {explicit[key]} and the --cmd line's {theirs} disagree",
                             f"drop {flag} (the line is read as {_TITLES[launch.engine]} reads it) or change the line")
        merged[key] = value
    return merged, [launch.summary(unused), *launch.notes]


def _same(key: str, ours: Any, theirs: Any) -> bool:
    if key == "engine":
        def name(engine: Any) -> str:
            text = str(engine).strip().lower()
            return "llama.cpp" if text == "ollama" else get_engine(text).name  # Ollama runs llama.cpp

        return name(ours) == name(theirs)
    return str(ours).strip().lower() == str(theirs).strip().lower()
