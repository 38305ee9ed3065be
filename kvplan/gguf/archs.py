"""Which GGUF architectures kvplan reads, and why it refuses the others.

A GGUF file names its architecture (``general.architecture``); llama.cpp reads each one by its own rules
(``src/llama-arch.cpp`` lists the names, ``src/models/<arch>.cpp`` loads each one's keys, and
``llama_model::create_memory`` in ``src/llama-model.cpp`` picks its cache). kvplan reads an architecture
only where it knows that rule: an architecture llama.cpp does not have is refused, and so is one whose
cache follows a rule kvplan's GGUF reader does not model (its config.json can still be sized).
The tables are read from llama.cpp's source as vendored by llama-cpp-python 0.3.36.
"""

from __future__ import annotations

from kvplan.errors import ConfigError

#: Every architecture name llama.cpp knows (``LLM_ARCH_NAMES`` in src/llama-arch.cpp).
LLAMACPP_ARCHS = frozenset("""
clip llama llama4 deci falcon grok gpt2 gptj gptneox mpt baichuan starcoder refact bert modern-bert nomic-bert
nomic-bert-moe neo-bert jina-bert-v2 jina-bert-v3 eurobert bloom stablelm qwen qwen2 qwen2moe qwen2vl qwen3 qwen3moe
qwen3next qwen3vl qwen3vlmoe qwen35 qwen35moe qwen4exp phi2 phi3 phimoe plamo plamo2 plamo3 codeshell orion internlm2
minicpm minicpm3 gemma gemma2 gemma3 gemma3n gemma4 gemma4-assistant gemma-embedding starcoder2 mamba mamba2 maple
jamba falcon-h1 xverse command-r cohere2 cohere2moe dbrx olmo olmo2 olmoe muse-glimmer openelm arctic deepseek
deepseek2 deepseek2-ocr deepseek32 deepseek4 chatglm glm4 glm4moe glm-dsa bitnet t5 t5encoder jais jais2 nemotron
nemotron_h nemotron_h_moe exaone exaone4 exaone-moe rwkv6 rwkv6qwen2 rwkv7 arwkv7 granite granitemoe granitehybrid
graniteswitch granite_swa chameleon wavtokenizer-dec plm bailingmoe bailingmoe2 bailingmoe3 dots1 dots3note arcee
afmoe laguna ernie4_5 ernie4_5-moe hunyuan-moe hunyuan-dense hunyuan_vl hy_v3 hy_v4 smollm3 gpt-oss lfm2 lfm2moe
dream smallthinker llada llada-moe seed_oss grovemoe apertus minimax-01 hrm_text minimax-m2 minimax-m3 cogvlm rnd1
pangu-embedded mistral3 eagle3 dflash mistral4 paddleocr mimo2 step35 spark2_5 llama-embed maincoder kimi-linear
kimi-k3 glm5-next talkie mellum nanbeige qwen3tts pockettts
""".split())

#: Architectures for which llama.cpp makes no KV cache at all (``create_memory`` returns none): encoders,
#: embedding and diffusion models.
NO_CACHE = frozenset({
    "bert", "jina-bert-v2", "jina-bert-v3", "nomic-bert", "nomic-bert-moe", "neo-bert", "eurobert", "wavtokenizer-dec",
    "modern-bert", "gemma-embedding", "dream", "llada", "llada-moe", "rnd1", "clip",
})

#: Architectures whose cache follows a rule kvplan's GGUF reader does not model yet, and what that rule is.
UNREAD: dict[str, str] = {
    **dict.fromkeys(("rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"), "RWKV token-shift and WKV states"),
    **dict.fromkeys(("plamo2", "kimi-linear", "kimi-k3", "minimax-01", "bailingmoe3", "nanbeige"),
                    "recurrent layers beside attention, chosen by the architecture's own rule"),
    "qwen4exp": "a hybrid cache with an indexer (llama_memory_hybrid_idx)",
    "glm5-next": "a hybrid cache with an indexer (llama_memory_hybrid_idx)",
    "minimax-m3": "an indexer key cache beside the sparse layers (llama_kv_cache_msa)",
    "glm-dsa": "a DSA cache with an indexer (llama_kv_cache_dsa)",
    "deepseek32": "a DSA cache with an indexer (llama_kv_cache_dsa)",
    **dict.fromkeys(("t5", "t5encoder"), "an encoder-decoder cache"),
    "gptj": "no loader (it names gptj but refuses the file: 'unsupported model architecture')",
    "eagle3": "a cache only beside a target model's context (an EAGLE-3 draft head: 'eagle3 requires ctx_other')",
    "plm": "no context in llama-cpp-python 0.3.36 (src/models/plm.cpp hands build_attn a 2-D V: a ggml shape assert)",
    **dict.fromkeys(("gemma4-assistant", "granite_swa", "maple", "mimo2", "phimoe", "spark2_5", "step35",
                     "dots3note", "dflash", "exaone-moe", "smallthinker"),
                    "sliding-window layers chosen by the architecture's own rule"),
}

#: llama.cpp's sliding period for architectures that slide by a fixed pattern (``load_swa_pattern`` /
#: ``set_swa_pattern`` in each src/models/<arch>.cpp): layer i slides when i % n < n - 1.
SWA_PERIOD: dict[str, int] = {"gemma2": 2, "gemma3": 6, "cohere2": 4, "gpt-oss": 2, "gemma3n": 5, "exaone4": 4,
                              "afmoe": 4, "mellum": 4, "muse-glimmer": 4, "olmo2": 4, "plamo3": 8, "llama4": 4}
#: Architectures whose file must say which layers slide (llama.cpp reads the sliding_window_pattern array, required).
SWA_PATTERN_REQUIRED = frozenset({"gemma4"})
#: The same with the full layer first (``dense_first``): layer i slides when i % n != 0.
SWA_PERIOD_DENSE_FIRST: dict[str, int] = {"cohere2moe": 4, "laguna": 4}


def check_architecture(arch: str, *, label: str) -> None:
    """Refuse, by name, an architecture kvplan cannot size from its GGUF metadata."""
    if arch not in LLAMACPP_ARCHS:
        raise ConfigError(
            f"{label}: general.architecture {arch!r} is not an architecture llama.cpp knows",
            "check the file (a GGUF converted for another engine?), or size the model from its config.json",
        )
    if arch in NO_CACHE:
        raise ConfigError(
            f"{label}: llama.cpp makes no KV cache for a {arch} model (an encoder, embedding or diffusion model)",
            "kvplan sizes the cache of decoder models; there is nothing to size here",
        )
    if arch in UNREAD:
        raise ConfigError(
            f"{label}: kvplan does not read {arch} GGUF files yet: llama.cpp gives it {UNREAD[arch]}",
            "size the model from its config.json (kvplan estimate -m ORG/NAME), which kvplan reads",
        )
