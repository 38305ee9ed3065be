"""kvplan's version (``kvplan.__version__``), in a module of its own so every other one can read it."""

__version__ = "0.1.0"
