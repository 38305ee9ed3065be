"""GGUF models (llama.cpp, Ollama, LM Studio): geometry and weights from the file's header alone.

``files`` names the GGUF files of a model (split sets, folders, a Hub repo's tags); ``reader`` reads a
header through a byte source (``hub`` reads a Hub file by HTTP ranges); ``model`` puts a model's shards
together; ``geometry`` and ``weights`` turn the header into the cache layout and the weight bytes;
``quantise`` sizes a config.json's weights as llama-quantize would store them. Which GGUF ``--model``
names is decided once, in :mod:`kvplan.modelref`. This package's own import is empty, so the resolver
reads file names (``files``) without loading the reader.
"""
