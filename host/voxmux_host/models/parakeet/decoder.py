"""TDT prediction network, joint, and the batched greedy label-looping decode.

Names follow NeMo's ``RNNTDecoder`` (``decoder.prediction.embed``, ``decoder.prediction.dec_rnn.lstm``)
and ``RNNTJoint`` (``joint.enc``, ``joint.pred``, ``joint.joint_net.2``).

The decode is NeMo's greedy label looping (``GreedyBatchedTDTLabelLoopingComputer``) written as one
uniform, branch-free step so that it is vectorised over the batch and can be captured in a CUDA graph.
Per item and step: evaluate the joint at (frame min(t, T-1), current prediction output); token = argmax
over tokens and blank, duration = durations[argmax over the duration logits], independently. A blank
advances t by max(duration, 1) and keeps the prediction state. A token is emitted at frame t, t advances
by its duration (which may be 0), and the prediction network consumes the token. After ``max_symbols``
consecutive emissions on one frame that did not move t, t is forced forward by one. An item stops once
t >= T; a token whose duration carries t past T is still kept.

NeMo interleaves the items differently (an inner loop over blanks while other items wait), but each
item's sequence of joint evaluations, and therefore its output, is the same.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple, cast

import torch
import torch.nn.functional as F
from torch import nn

from .config import ParakeetConfig


class LSTMDropout(nn.Module):
    """NeMo's wrapper; only its ``lstm`` child holds parameters (dropout is training-only)."""

    def __init__(self, config: ParakeetConfig, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.lstm = nn.LSTM(  # type: ignore[no-untyped-call]
            config.pred_hidden, config.pred_hidden, num_layers=config.pred_layers, device=device
        )


def _embedding(config: ParakeetConfig, device: torch.device | str | None) -> nn.Embedding:
    """The prediction network's embedding, initialised as ``nn.Embedding`` does except on the meta device.

    On torch 2.x, ``nn.init.normal_`` of a meta tensor runs a Python reference kernel that imports
    ``torch._dynamo`` (and sympy): 3.5 to 5.5 s on a fresh H200 host, the bulk of model_build, for
    values that are never used (the checkpoint or the seeded init replaces them).
    """
    weight = torch.empty(config.vocab_size + 1, config.pred_hidden, device=device)
    embed = nn.Embedding(config.vocab_size + 1, config.pred_hidden, padding_idx=config.blank_id, _weight=weight)
    if weight.device.type != "meta":
        embed.reset_parameters()
    return embed


class RNNTDecoder(nn.Module):
    def __init__(self, config: ParakeetConfig, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.config = config
        self.prediction = nn.ModuleDict(
            {
                "embed": _embedding(config, device),
                "dec_rnn": LSTMDropout(config, device),
            }
        )

    @property
    def lstm(self) -> nn.LSTM:
        return cast(nn.LSTM, self.prediction["dec_rnn"].lstm)

    def step_into(
        self, labels: torch.Tensor, h: torch.Tensor, c: torch.Tensor, update: Optional[torch.Tensor] = None
    ) -> torch.Tensor:
        """One step on ``labels`` [B]; the state h, c [L, B, P] is replaced in place where ``update``
        [B, 1] is True (everywhere when None). Returns the new top-layer output [B, P] for every item."""
        return prediction_step(self.prediction["embed"].weight, lstm_layer_weights(self.lstm), labels, h, c, update)  # type: ignore[index]


LayerWeights = Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def lstm_layer_weights(lstm: nn.LSTM) -> List[LayerWeights]:
    """(weight_ih, weight_hh, bias_ih, bias_hh) of each layer: the parameters themselves."""
    return [
        (
            getattr(lstm, f"weight_ih_l{layer}"),
            getattr(lstm, f"weight_hh_l{layer}"),
            getattr(lstm, f"bias_ih_l{layer}"),
            getattr(lstm, f"bias_hh_l{layer}"),
        )
        for layer in range(lstm.num_layers)
    ]


def prediction_step(
    embed: torch.Tensor,
    layers: Sequence[LayerWeights],
    labels: torch.Tensor,
    h: torch.Tensor,
    c: torch.Tensor,
    update: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """The prediction network on tensors alone (see ``RNNTDecoder.step_into``)."""
    x = embed[labels]  # (a gather; F.embedding is slower)
    for layer, (w_ih, w_hh, b_ih, b_hh) in enumerate(layers):
        h_l, c_l = torch.lstm_cell(x, (h[layer], c[layer]), w_ih, w_hh, b_ih, b_hh)
        if update is None:
            h[layer].copy_(h_l)
            c[layer].copy_(c_l)
        else:
            torch.where(update, h_l.to(h.dtype), h[layer], out=h[layer])
            torch.where(update, c_l.to(c.dtype), c[layer], out=c[layer])
        x = h_l
    return x


class RNNTJoint(nn.Module):
    """logits = joint_net(relu(enc(f) + pred(g))), width vocab + 1 (blank) + len(durations)."""

    def __init__(self, config: ParakeetConfig, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.pred = nn.Linear(config.pred_hidden, config.joint_hidden, device=device)
        self.enc = nn.Linear(config.d_model, config.joint_hidden, device=device)
        layers: List[nn.Module] = [nn.ReLU()]
        if config.joint_dropout_layer:
            layers.append(nn.Dropout(0.0))
        layers.append(nn.Linear(config.joint_hidden, config.joint_output_size, device=device))
        self.joint_net = nn.Sequential(*layers)

    @property
    def output_layer(self) -> nn.Linear:
        return cast(nn.Linear, self.joint_net[-1])

    def project_encoder(self, enc: torch.Tensor) -> torch.Tensor:
        return cast(torch.Tensor, self.enc(enc))

    def project_prednet(self, g: torch.Tensor) -> torch.Tensor:
        return cast(torch.Tensor, self.pred(g))

    def joint_after_projection(self, f: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        out = self.output_layer
        return F.linear(torch.relu(f + g), out.weight, out.bias)


@dataclass
class DecodeState:
    """Every tensor the decode reads or writes, allocated once so that a CUDA graph can own the step.

    Token k of item b is ``emitted[b, k] = (token id, encoder frame, duration in frames)`` for
    k < ``count[b]``. ``steps`` counts joint evaluations per item.
    """

    enc_proj: torch.Tensor  # [B, T, J] projected encoder frames
    enc_len: torch.Tensor  # [B] int64
    last_frame: torch.Tensor  # [B] max(enc_len - 1, 0)
    t: torch.Tensor  # [B] int64 current frame
    last_t: torch.Tensor  # [B] frame of the last emission (-1 before any)
    same_count: torch.Tensor  # [B] consecutive emissions on last_t
    count: torch.Tensor  # [B] emitted tokens
    steps: torch.Tensor  # [B] joint evaluations
    h: torch.Tensor  # [L, B, P]
    c: torch.Tensor  # [L, B, P]
    g: torch.Tensor  # [B, J] projected prediction output
    emitted: torch.Tensor  # [B, max_tokens + 1, 3] (token, frame, duration); the last slot is scratch
    any_active: torch.Tensor  # [] bool
    batch_index: torch.Tensor  # [B] arange
    blank_labels: torch.Tensor  # [B] filled with the blank id

    @property
    def batch_size(self) -> int:
        return int(self.t.shape[0])

    @property
    def max_frames(self) -> int:
        return int(self.enc_proj.shape[1])

    @property
    def max_tokens(self) -> int:
        """Tokens an item can hold; ``emitted`` has one more slot, a scratch slot that takes the
        unconditional writes of items that are full or finished."""
        return int(self.emitted.shape[1]) - 1

    @staticmethod
    def allocate(
        config: ParakeetConfig, batch_size: int, max_frames: int, device: torch.device, dtype: torch.dtype
    ) -> "DecodeState":
        b, long = batch_size, torch.int64
        # At most max_symbols emissions per frame before t must move, so this bound is never reached.
        max_tokens = max(1, max_frames * config.max_symbols)
        return DecodeState(
            enc_proj=torch.zeros(b, max_frames, config.joint_hidden, device=device, dtype=dtype),
            enc_len=torch.zeros(b, dtype=long, device=device),
            last_frame=torch.zeros(b, dtype=long, device=device),
            t=torch.zeros(b, dtype=long, device=device),
            last_t=torch.full((b,), -1, dtype=long, device=device),
            same_count=torch.zeros(b, dtype=long, device=device),
            count=torch.zeros(b, dtype=long, device=device),
            steps=torch.zeros(b, dtype=long, device=device),
            h=torch.zeros(config.pred_layers, b, config.pred_hidden, device=device, dtype=dtype),
            c=torch.zeros(config.pred_layers, b, config.pred_hidden, device=device, dtype=dtype),
            g=torch.zeros(b, config.joint_hidden, device=device, dtype=dtype),
            emitted=torch.zeros(b, max_tokens + 1, 3, dtype=long, device=device),
            any_active=torch.zeros((), dtype=torch.bool, device=device),
            batch_index=torch.arange(b, device=device),
            blank_labels=torch.full((b,), config.blank_id, dtype=long, device=device),
        )


@dataclass
class DecodedItem:
    tokens: List[int]
    frames: List[int]  # encoder frame of each token
    durations: List[int]  # duration of each token, in encoder frames
    steps: int


class TDTGreedyDecoder:
    """Runs the decode step on a :class:`DecodeState`; every update is in place (CUDA-graph safe)."""

    def __init__(self, decoder: RNNTDecoder, joint: RNNTJoint, config: ParakeetConfig) -> None:
        self.decoder = decoder
        self.joint = joint
        self.config = config
        self._durations: Optional[torch.Tensor] = None
        self.durations_are_indices = list(config.durations) == list(range(len(config.durations)))
        self._params: Optional[StepParams] = None
        self._params_device: Optional[torch.device] = None
        self._step_fn: Callable[[DecodeState, StepParams], None] = decode_step

    def durations_on(self, device: torch.device) -> torch.Tensor:
        if self._durations is None or self._durations.device != device:
            self._durations = torch.tensor(self.config.durations, dtype=torch.int64, device=device)
        return self._durations

    def prepare(self, device: torch.device) -> None:
        """Allocate the constants used by ``step`` (call before any CUDA graph capture)."""
        self.durations_on(device)
        self._params, self._params_device = StepParams.of(self, device), device

    def compile_step(self) -> None:
        """Run ``step`` through ``torch.compile`` (torch >= 2.0 with a working Triton).

        The eager step launches about 45 small kernels; compiled, its elementwise work fuses into a few,
        which matters most at small batch sizes where the decode is launch-bound. The compiled function is
        module-free (:func:`decode_step` on tensors and integers). Each batch size compiles once, on its
        first call: run every shape before capturing CUDA graphs (the runner's prepare() does), so no
        compilation happens while a graph is being captured.
        """
        compile_fn = getattr(torch, "compile", None)
        if compile_fn is None:
            raise RuntimeError(f"Expected torch >= 2.0 for a compiled decode step: got torch {torch.__version__}")
        self._step_fn = compile_fn(decode_step, dynamic=False)

    def init_state(self, state: DecodeState) -> None:
        """Reset the per-item counters; feed SOS (= blank) through the prediction network once."""
        state.last_frame.copy_((state.enc_len - 1).clamp(min=0))
        state.t.zero_()
        state.last_t.fill_(-1)
        state.same_count.zero_()
        state.count.zero_()
        state.steps.zero_()
        state.h.zero_()
        state.c.zero_()
        out = self.decoder.step_into(state.blank_labels, state.h, state.c)
        state.g.copy_(self.joint.project_prednet(out))
        state.any_active.copy_((state.t < state.enc_len).any())

    def step(self, state: DecodeState) -> None:
        """One decode step for every item (see the module docstring); all updates are in place."""
        device = state.t.device
        if self._params is None or self._params_device != device:
            self._params, self._params_device = StepParams.of(self, device), device
        self._step_fn(state, self._params)

    def run_steps(self, state: DecodeState, steps: int) -> None:
        """``steps`` decode steps, then refresh ``any_active``."""
        for _ in range(steps):
            self.step(state)
        state.any_active.copy_((state.t < state.enc_len).any())

    @staticmethod
    def max_steps(max_frames: int, config: ParakeetConfig) -> int:
        """An upper bound on the steps any item needs: each frame sees at most max_symbols emissions
        (each followed by a step) plus one blank step."""
        return max_frames * (config.max_symbols + 1) + 1

    def decode_eager(self, state: DecodeState, chunk_steps: int = 8) -> None:
        """Decode to the end, checking for completion every ``chunk_steps`` steps (one host sync each)."""
        limit = self.max_steps(state.max_frames, self.config)
        done = 0
        while bool(state.any_active):
            if done > limit:
                raise RuntimeError(f"Decoding did not finish within {limit} steps")
            self.run_steps(state, chunk_steps)
            done += chunk_steps


JointFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
PredictFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class StepParams:
    """What one decode step calls besides the state: the joint and the prediction network as plain
    functions of tensors (for the project's modules, closures over their parameter tensors, so that a
    compiled step traces no module), and the decode's constants."""

    joint: JointFn  # (f [B, J], g [B, J]) -> logits [B, V + 1 + D]
    predict: PredictFn  # (labels [B], h, c, update [B, 1]) -> projected output [B, J]; h, c updated in place
    durations: Optional[torch.Tensor]  # None when the duration index is the duration
    blank_id: int
    vocab_with_blank: int
    max_symbols: int

    @staticmethod
    def of(greedy: "TDTGreedyDecoder", device: torch.device) -> "StepParams":
        decoder, joint = greedy.decoder, greedy.joint
        if isinstance(decoder, RNNTDecoder) and isinstance(joint, RNNTJoint):
            joint_fn, predict_fn = _module_free_functions(decoder, joint)
        else:  # stand-ins with the same methods (tests)
            joint_fn = joint.joint_after_projection

            def predict_fn(labels: torch.Tensor, h: torch.Tensor, c: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
                return joint.project_prednet(decoder.step_into(labels, h, c, update))

        return StepParams(
            joint=joint_fn,
            predict=predict_fn,
            durations=None if greedy.durations_are_indices else greedy.durations_on(device),
            blank_id=greedy.config.blank_id,
            vocab_with_blank=greedy.config.vocab_size + 1,
            max_symbols=greedy.config.max_symbols,
        )


def _module_free_functions(decoder: RNNTDecoder, joint: RNNTJoint) -> Tuple[JointFn, PredictFn]:
    out_weight, out_bias = joint.output_layer.weight, joint.output_layer.bias
    pred_weight, pred_bias = joint.pred.weight, joint.pred.bias
    embed = decoder.prediction["embed"].weight  # type: ignore[index]
    layers = lstm_layer_weights(decoder.lstm)

    def joint_fn(f: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return F.linear(torch.relu(f + g), out_weight, out_bias)

    def predict_fn(labels: torch.Tensor, h: torch.Tensor, c: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        return F.linear(prediction_step(embed, layers, labels, h, c, update), pred_weight, pred_bias)

    return joint_fn, predict_fn


def decode_step(state: DecodeState, p: StepParams) -> None:
    """One greedy TDT step for every item of ``state``, in place (see the module docstring)."""
    active = state.t < state.enc_len
    frame = torch.minimum(state.t, state.last_frame)
    f = state.enc_proj[state.batch_index, frame]
    logits = p.joint(f, state.g).float()
    token = logits[:, : p.vocab_with_blank].argmax(dim=-1)
    duration = logits[:, p.vocab_with_blank :].argmax(dim=-1)
    if p.durations is not None:
        duration = p.durations[duration]
    is_blank = token == p.blank_id
    duration = torch.where(is_blank, duration.clamp(min=1), duration)  # a blank always advances
    emit = active & ~is_blank

    # Written unconditionally at slot `count`; the slot only counts once `count` moves past it.
    max_tokens = state.emitted.shape[1] - 1
    slot = state.count.clamp(max=max_tokens).view(-1, 1, 1).expand(-1, 1, 3)
    state.emitted.scatter_(1, slot, torch.stack((token, state.t, duration), dim=-1).unsqueeze(1))

    same_frame = emit & (state.last_t == state.t)
    torch.where(emit, state.same_count * same_frame + 1, state.same_count, out=state.same_count)
    torch.where(emit, state.t, state.last_t, out=state.last_t)
    # After max_symbols emissions on one frame, a zero-duration token moves t on by one.
    stuck = emit & (state.same_count >= p.max_symbols) & (duration == 0)
    state.t.add_(duration * active + stuck)
    state.count.add_(emit)  # never passes max_tokens: at most max_symbols tokens per frame
    state.steps.add_(active)

    # The prediction network consumes emitted tokens; items that emitted nothing keep their state.
    emit_col = emit.unsqueeze(-1)
    g = p.predict(token, state.h, state.c, emit_col)
    torch.where(emit_col, g.to(state.g.dtype), state.g, out=state.g)


def collect_results(state: DecodeState, batch_size: int) -> List[DecodedItem]:
    """Copy the first ``batch_size`` items' tokens to the host."""
    count = state.count[:batch_size].clamp(max=state.max_tokens).cpu()
    width = int(count.max()) if batch_size > 0 else 0
    steps = state.steps[:batch_size].cpu()
    packed = state.emitted[:batch_size, :width].cpu()
    items: List[DecodedItem] = []
    for b in range(batch_size):
        rows = packed[b, : int(count[b])]
        items.append(
            DecodedItem(
                tokens=rows[:, 0].tolist(),
                frames=rows[:, 1].tolist(),
                durations=rows[:, 2].tolist(),
                steps=int(steps[b]),
            )
        )
    return items
