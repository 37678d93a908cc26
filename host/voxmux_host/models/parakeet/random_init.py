"""Seeded random weights whose greedy decode behaves like a trained model's, in rate if not in content.

Serving cost does not depend on weight values, except through the decoder: a random joint network may
emit a token on every step or never, and advance by arbitrary durations. So the joint's output layer is
shaped on purpose:

- its weights are scaled so that, for the hidden vectors the joint actually sees, every logit carries
  noise of standard deviation ~1 (the hidden norm is measured on the model itself);
- token logits get no bias (which token wins is decided by the noise, so text varies with the audio);
- the blank logit gets the bias that makes a token win ``TOKEN_PROBABILITY`` of the steps against the
  maximum of ``vocab_size`` such noises;
- the duration logits get biases that make the duration argmax follow ``DURATION_PROBABILITIES``.

With 80 ms frames that gives about 12.5 * p / E[advance] = 3.5 tokens per second of audio and steps
that advance 1 to 4 frames, near a trained English model (3 to 4 subword tokens per second).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Sequence, Tuple, cast

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from .config import ParakeetConfig

if TYPE_CHECKING:  # model.py imports this module
    from .model import ParakeetModel

#: Share of decode steps that emit a token (the rest are blanks).
TOKEN_PROBABILITY = 0.55
#: Target probabilities of durations 0, 1, 2, 3, 4 frames (extra durations share the last value).
#: Duration 0 is left out: after a zero-duration token the next step sees the same frame and almost the
#: same hidden vector, so random weights would repeat it up to max_symbols times.
DURATION_PROBABILITIES = (0.0, 0.38, 0.31, 0.19, 0.12)


#: Random attention weighs all frames about equally, so each layer adds nearly the same vector to every
#: frame; over 24 layers that washes out the frames' differences (measured: the share of the encoder
#: output's variance that varies over time falls from 0.4 to 0.003). Scaling the attention output down
#: keeps it near 0.35 and leaves the cost unchanged.
ATTENTION_OUTPUT_GAIN = 0.1


#: The prediction network's state changes only when a token is emitted, so whatever it adds to the
#: joint's hidden vector is a fixed offset for a whole run of blanks, which skews every decision in the
#: run. Scaled down, the frames decide and the state only nudges.
PREDICTION_GAIN = 0.25


def expected_tokens_per_second(config: ParakeetConfig) -> float:
    """The rate the biases aim for (independent Gaussian logits assumed)."""
    probs = np.asarray(_duration_targets(config.durations))
    durs = np.asarray(config.durations, dtype=np.float64)
    token_advance = float((probs * durs).sum())
    blank_advance = float((probs * np.maximum(durs, 1)).sum())
    p = TOKEN_PROBABILITY
    steps_per_frame = 1.0 / (p * token_advance + (1 - p) * blank_advance)
    return p * steps_per_frame / config.frame_seconds


def _duration_targets(durations: Sequence[int]) -> Tuple[float, ...]:
    n = len(durations)
    base = list(DURATION_PROBABILITIES[:n]) + [DURATION_PROBABILITIES[-1]] * max(0, n - len(DURATION_PROBABILITIES))
    total = sum(base)
    return tuple(x / total for x in base)


#: A logit bias that never wins against unit-variance noise.
NEVER_BIAS = -30.0


def blank_bias_for(token_probability: float, vocab_size: int) -> float:
    """beta such that P(N0 + beta > max of vocab_size iid N(0, 1)) = 1 - token_probability.

    P(blank wins) = integral of phi(x) * Phi(x + beta)^V dx, solved by bisection on a fixed grid.
    """
    grid = np.linspace(-12.0, 12.0, 4801)
    phi = np.exp(-0.5 * grid**2) / math.sqrt(2 * math.pi)
    step = grid[1] - grid[0]

    def p_blank(beta: float) -> float:
        cdf = 0.5 * (1.0 + _erf((grid + beta) / math.sqrt(2.0)))
        return float((phi * cdf**vocab_size).sum() * step)

    lo, hi = -10.0, 15.0
    target = 1.0 - token_probability
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if p_blank(mid) < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _erf(x: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    return cast(npt.NDArray[np.float64], torch.erf(torch.from_numpy(np.asarray(x, dtype=np.float64))).numpy())


def duration_biases_for(
    probabilities: Sequence[float], samples: int = 100_000, seed: int = 7
) -> npt.NDArray[np.float64]:
    """Biases b such that argmax(b + N(0, I)) lands on index i with probability[i] (fixed-point search)."""
    rng = np.random.default_rng(seed)
    target = np.asarray(probabilities, dtype=np.float64)
    live = target > 0
    bias = np.full(target.shape, NEVER_BIAS)
    noise = rng.standard_normal((samples, int(live.sum())))
    live_target = target[live] / target[live].sum()
    live_bias = np.log(live_target) * 1.5
    for _ in range(60):
        hits = np.bincount(np.argmax(noise + live_bias, axis=1), minlength=live_target.size) / samples
        live_bias = live_bias + 0.8 * (np.log(live_target) - np.log(np.maximum(hits, 1e-6)))
        live_bias -= live_bias.max()
    bias[live] = live_bias
    return bias


def _uniform_(tensor: torch.Tensor, bound: float, generator: torch.Generator) -> None:
    with torch.no_grad():
        tensor.uniform_(-bound, bound, generator=generator)


def init_random_weights_(model: "ParakeetModel", config: ParakeetConfig, seed: int) -> None:
    """Fill every parameter and buffer of a :class:`ParakeetModel` from ``seed`` (CPU generator).

    Linear and convolution weights are N(0, 1/fan_in) (2/fan_in before a ReLU), which keeps the signal's
    variation through the network, so encoder frames differ over time as a trained model's do; biases are
    small, U(-0.1 std, 0.1 std). LayerNorm and BatchNorm are identity, relative-position biases are zero
    (as NeMo initialises them), LSTM weights
    are U(-1/sqrt(hidden), 1/sqrt(hidden)), the embedding is N(0, 1) with a zero blank row. The joint
    output layer is then shaped as described in the module docstring.
    """
    gen = torch.Generator(device="cpu").manual_seed(seed)
    subsampling = model.encoder.pre_encode.conv
    relu_inputs = {id(m) for m in subsampling if isinstance(m, nn.Conv2d)}
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)):
                fan_in = module.weight[0].numel()
                gain = math.sqrt(2.0) if id(module) in relu_inputs else 1.0
                std = gain / math.sqrt(fan_in)
                _fill_(module.weight, lambda t: t.normal_(0.0, std, generator=gen))
                if module.bias is not None:
                    _fill_(module.bias, lambda t: _uniform_(t, 0.1 * std, gen))
            elif isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.fill_(0.0)
            elif isinstance(module, nn.BatchNorm1d):
                module.weight.fill_(1.0)
                module.bias.fill_(0.0)
                module.running_mean.zero_()  # type: ignore[union-attr]
                module.running_var.fill_(1.0)  # type: ignore[union-attr]
                module.num_batches_tracked.zero_()  # type: ignore[union-attr]
            elif isinstance(module, nn.LSTM):
                bound = 1.0 / math.sqrt(module.hidden_size)
                for param in module.parameters():
                    _fill_(param, lambda t: _uniform_(t, bound, gen))
            elif isinstance(module, nn.Embedding):
                _fill_(module.weight, lambda t: t.normal_(0.0, 1.0, generator=gen))
                if module.padding_idx is not None:
                    module.weight[module.padding_idx].zero_()
        for name, param in model.named_parameters():
            if name.endswith("pos_bias_u") or name.endswith("pos_bias_v"):
                param.zero_()
            elif name.endswith("self_attn.linear_out.weight"):
                param.mul_(ATTENTION_OUTPUT_GAIN)
        model.joint.pred.weight.mul_(PREDICTION_GAIN)
        model.joint.pred.bias.mul_(PREDICTION_GAIN)
        shape_joint_output_(model, config, gen)


def _fill_(tensor: torch.Tensor, fill: Callable[[torch.Tensor], object]) -> None:
    """Fill on the CPU with the seeded generator (values then do not depend on the target device)."""
    if tensor.device.type == "cpu" and tensor.dtype == torch.float32:
        fill(tensor)
        return
    scratch = torch.empty(tensor.shape, dtype=torch.float32)
    fill(scratch)
    tensor.copy_(scratch)


def speech_like_noise(seconds: float, seed: int, sample_rate_hz: int = 16000) -> npt.NDArray[np.float32]:
    """Seeded float32 audio with a speech-like envelope: noise and a gliding harmonic tone, gated at a
    syllable rate of about 4 Hz. Used to calibrate the joint and by benchmarks; it is not speech."""
    rng = np.random.default_rng(seed)
    n = int(seconds * sample_rate_hz)
    t = np.arange(n) / sample_rate_hz
    envelope = np.clip(np.sin(2 * np.pi * (3.5 + 1.5 * rng.random()) * t + rng.random() * 6.28), 0.0, None) ** 2
    pitch = 110.0 + 60.0 * np.sin(2 * np.pi * 0.3 * t + rng.random() * 6.28)
    phase = 2 * np.pi * np.cumsum(pitch) / sample_rate_hz
    voiced = sum(np.sin(k * phase) / k for k in range(1, 6))
    noise = rng.standard_normal(n)
    audio = envelope * (0.6 * voiced + 0.4 * noise) * 0.1 + 0.002 * rng.standard_normal(n)
    return cast(npt.NDArray[np.float32], audio.astype(np.float32))


def _sample_joint_hidden(model: "ParakeetModel", config: ParakeetConfig, gen: torch.Generator) -> torch.Tensor:
    """Hidden vectors relu(enc(f) + pred(g)) like those the joint sees during a decode.

    f are the model's own encoder frames for a speech-like clip; g are prediction-network outputs after
    a few random tokens. Every (frame, output) pair is one sample.
    """
    joint = model.joint
    decoder = model.decoder
    clip = torch.from_numpy(speech_like_noise(4.0, seed=int(torch.randint(0, 2**31 - 1, (1,), generator=gen))))
    was_training = model.training
    model.eval()  # BatchNorm must use its running statistics, as at inference
    enc, enc_len = model.encode(clip.unsqueeze(0), torch.tensor([clip.shape[0]]))
    model.train(was_training)
    frames = joint.project_encoder(enc[0, : int(enc_len[0])])  # [T, J]
    samples = 32
    labels = torch.randint(0, config.vocab_size, (4, samples), generator=gen)
    h = torch.zeros(config.pred_layers, samples, config.pred_hidden)
    c = torch.zeros_like(h)
    outputs = [joint.project_prednet(decoder.step_into(torch.full((samples,), config.blank_id), h, c))]
    for row in labels:
        outputs.append(joint.project_prednet(decoder.step_into(row, h, c)))
    preds = torch.cat(outputs)  # [5 * samples, J]
    hidden = torch.relu(frames.unsqueeze(1) + preds.unsqueeze(0)).reshape(-1, frames.shape[1])
    return hidden.float()


def shape_joint_output_(model: "ParakeetModel", config: ParakeetConfig, gen: torch.Generator) -> None:
    """Unit-variance logit noise around zero for every output, plus the designed biases.

    The random weights' response to the average hidden vector is subtracted through the bias: left in,
    it would be a fixed per-output offset that makes the same token and duration win at every step.
    """
    hidden = _sample_joint_hidden(model, config, gen).double()
    mean = hidden.mean(dim=0)
    rms_norm = float((hidden - mean).pow(2).sum(dim=1).mean().sqrt())
    layer = model.joint.output_layer
    weight = torch.randn(layer.weight.shape, generator=gen, dtype=torch.float64) / max(rms_norm, 1e-6)
    bias = -(weight @ mean)
    bias[config.blank_id] += blank_bias_for(TOKEN_PROBABILITY, config.vocab_size)
    bias[config.vocab_size + 1 :] += torch.from_numpy(duration_biases_for(_duration_targets(config.durations)))
    layer.weight.copy_(weight.float())
    layer.bias.copy_(bias.float())
