"""Streaming Sortformer speaker diarization (diar_streaming_sortformer_4spk-v2 shapes) in plain PyTorch,
loadable from NeMo ``.nemo`` files.

The host imports :class:`voxmux_host.models.sortformer.adapter.SortformerAdapter`; the other modules are
the model (``config``, ``model``, ``random_init``, ``nemo``; the FastConformer and the mel filterbank are
shared with ``parakeet``), the front end over a session's audio (``features``), the speaker cache and
FIFO update (``cache``), one session's state and its bytes (``session``), the batched step runner with its
CUDA graphs (``engine``) and the segments (``postprocess``).
"""
