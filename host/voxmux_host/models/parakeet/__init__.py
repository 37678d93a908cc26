"""Parakeet-TDT (FastConformer encoder + TDT decoder) in plain PyTorch, loadable from NeMo ``.nemo`` files.

The host imports :class:`voxmux_host.models.parakeet.adapter.ParakeetAdapter`; the other modules are
the model (``config``, ``features``, ``encoder``, ``decoder``, ``model``, ``fp8``, ``kernels``,
``triton_kernels``), its weights (``random_init``, ``nemo``), text (``tokenizer``) and execution:

- ``runner``: runs batches, through CUDA graphs where one fits and eagerly otherwise, composing
- ``graphs``: the graphs per (batch size, length bucket), their capture, and the plan that picks them;
- ``staging``: pinned staging buffers and the copies of a batch's audio into the graphs' inputs;
- ``decode_loop``: the TDT greedy decode loop, eager or as replays of a captured decode chunk.

``experimental`` holds the adapter's experimental options (off by default, names prefixed).
"""
