"""``kvplan verify``: run a real decode and compare its cache bytes with kvplan's prediction.

The only package of kvplan that imports torch, and only in the modules that run it:

- :mod:`kvplan.verify.predict` - the plan of the decode and the bytes kvplan predicts (pure, no torch);
- :mod:`kvplan.verify.report` - the measurement records and the ``verify`` report (pure, no torch);
- :mod:`kvplan.verify.caches` - the cache layouts the decode allocates (torch);
- :mod:`kvplan.verify.decode` - the decoder, its memory check, the ranks of ``--tp`` (torch);
- :mod:`kvplan.verify.hf` - the cross-check with Hugging Face transformers' own caches (torch).

Nothing here is imported at package import, so ``import kvplan.verify.predict`` never loads torch.
"""
