"""Write kvplan/data/no_decoder_types.txt: the model types of the installed transformers that have no decoder.

    python tools/no_decoder_types.py            # rewrite the file from the installed transformers
    python tools/no_decoder_types.py --check    # exit 1 when the file differs (the test suite runs this)

A model type has a decoder, and so a KV cache or a recurrent state kvplan can size, when transformers' auto
mappings give it a generating head (causal LM, seq2seq LM, image-text-to-text, multimodal LM, speech seq2seq,
text-to-speech/waveform, causal image modelling, time-series prediction, RNN-T/TDT decoders, visual or document
question answering, text recognition), when its own modeling file has a ``GenerationMixin`` model although no
mapping names it (GLM-Image, CLVP), or when it is the language-model config a generating model nests (the
``text_config`` of Qwen2.5-VL is ``qwen2_5_vl_text``). Every other type in ``CONFIG_MAPPING_NAMES`` -- vision
towers (``ovis2_5_vision``), audio encoders, encoder-only text models, classifiers, detectors -- keeps no cache:
kvplan refuses it by name (exit 2) unless a family module reads it. Nested configs under a key that names a tower
(``vision_config``, ``audio_config``, ``encoder_config``, ...) stay on the list.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "kvplan" / "data" / "no_decoder_types.txt"

#: transformers' auto mappings whose model types generate, so keep a decoder's cache.
GENERATING = (
    "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES", "MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES",
    "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES", "MODEL_FOR_TEXT_TO_SPECTROGRAM_MAPPING_NAMES",
    "MODEL_FOR_TEXT_TO_WAVEFORM_MAPPING_NAMES", "MODEL_FOR_CAUSAL_IMAGE_MODELING_MAPPING_NAMES",
    "MODEL_FOR_TIME_SERIES_PREDICTION_MAPPING_NAMES", "MODEL_FOR_RNNT_MAPPING_NAMES", "MODEL_FOR_TDT_MAPPING_NAMES",
    "MODEL_FOR_VISUAL_QUESTION_ANSWERING_MAPPING_NAMES", "MODEL_FOR_DOCUMENT_QUESTION_ANSWERING_MAPPING_NAMES",
    "MODEL_FOR_TEXT_RECOGNITION_MAPPING_NAMES", "MODEL_FOR_VISION_2_SEQ_MAPPING_NAMES",
)
#: Words in a sub-config's key that name a tower, not the decoder a generating model nests.
TOWER_WORDS = ("vision", "visual", "image", "video", "audio", "speech", "encoder", "backbone", "vit", "codec",
               "tokenizer", "perceiver", "projector", "acoustic", "semantic", "embed", "mel", "detector", "depth")


def _nested_types(node: Mapping[str, Any], key: str = "") -> Iterator[tuple[str, str]]:
    """(key, model_type) of every config nested in ``node``, at any depth."""
    for k, v in node.items():
        if isinstance(v, Mapping):
            if isinstance(v.get("model_type"), str):
                yield k, v["model_type"]
            yield from _nested_types(v, k)


def _generates(model_type: str) -> bool:
    """A model type that is its module's own (not a tower's sub-config) and whose modeling file has a
    ``GenerationMixin`` model, though no auto mapping gives it a generating head (GLM-Image, CLVP)."""
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    module = model_type_to_module_name(model_type)
    if module.replace("_", "") != model_type.replace("-", "").replace("_", ""):
        return False
    import transformers

    source = Path(transformers.__file__).parent / "models" / module / f"modeling_{module}.py"
    return source.exists() and "GenerationMixin)" in source.read_text(encoding="utf-8")


def no_decoder_types() -> tuple[str, list[str]]:
    """(transformers version, the sorted model types with no decoder)."""
    import transformers
    from transformers.models.auto import configuration_auto, modeling_auto

    generating = {t for name in GENERATING for t in getattr(modeling_auto, name, {})}
    generating |= {t for t in configuration_auto.CONFIG_MAPPING_NAMES if _generates(t)}
    decoders = set(generating)
    warnings.simplefilter("ignore")
    for model_type in sorted(generating):
        try:
            config = configuration_auto.CONFIG_MAPPING[model_type]().to_dict()
        except Exception:  # a config class that needs arguments: its nested types stay unknown
            continue
        decoders |= {t for k, t in _nested_types(config) if not any(w in k.lower() for w in TOWER_WORDS)}
    return transformers.__version__, sorted(set(configuration_auto.CONFIG_MAPPING_NAMES) - decoders)


def render() -> str:
    version, types = no_decoder_types()
    head = (f"# Model types of transformers {version} with no decoder (tools/no_decoder_types.py writes this file):\n"
            "# no generating head in its auto mappings, and not the language model a generating model nests.\n")
    return head + "".join(f"{t}\n" for t in types)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 when the file is not what transformers gives")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} differs from the installed transformers: run python tools/no_decoder_types.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT} ({text.count(chr(10)) - 2} model types)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
