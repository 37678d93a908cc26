"""Parakeet-TDT (FastConformer encoder + TDT decoder) in plain PyTorch, loadable from NeMo ``.nemo`` files.

The host imports :class:`voxmux_host.models.parakeet.adapter.ParakeetAdapter`; the other modules are
the model (``config``, ``features``, ``encoder``, ``decoder``, ``model``), its weights (``random_init``,
``nemo``), text (``tokenizer``) and execution (``runner``: CUDA graphs and eager batches).
"""
