"""``kvplan verify``: run a real decode and compare its cache bytes with kvplan's prediction.

The only package of kvplan that imports torch or llama_cpp, and only in the modules that run them:

- :mod:`kvplan.verify.predict` - the plan of the decode and the bytes kvplan predicts (pure, no torch);
- :mod:`kvplan.verify.report` - the measurement records and the ``verify`` report (pure, no torch);
- :mod:`kvplan.verify.caches` - the cache layouts the decode allocates (torch);
- :mod:`kvplan.verify.decode` - the decoder, its memory check, the ranks of ``--tp`` (torch);
- :mod:`kvplan.verify.hf` - the cross-check with Hugging Face transformers' own caches (torch);
- :mod:`kvplan.verify.llamacpp` - ``--engine llama.cpp``: the real llama.cpp's caches against its profile (pure;
  :mod:`~kvplan.verify.llamacpp_lines` reads and writes llama.cpp's cache lines,
  :mod:`~kvplan.verify.llamacpp_engine` starts :mod:`~kvplan.verify.llamacpp_run`, the child process that
  imports llama_cpp, and :mod:`~kvplan.verify.llamacpp_gguf` writes small GGUFs with gguf and numpy).

Nothing here is imported at package import, so ``import kvplan.verify.predict`` never loads torch.
"""
