"""Seeded random voices: the model's initial weights from a seed, with a duration predictor calibrated to a
realistic speech rate.

Random weights speak noise, but they must speak it at the pace of speech, or audio lengths, first-byte
times and real-time factors measured with them mean nothing. The stochastic duration predictor's last step
in reverse is its ElementwiseAffine flow (``dp.flows.0``): log-duration = (z0 - m[0]) * exp(-logs[0]). So
the calibration sets ``dp.flows.0.m[0]``: it runs the voice's own text encoder and duration predictor on a
fixed English passage (the IPA of "The North Wind and the Sun", fixed noise) and bisects m[0] until the
passage lasts phones / rate seconds, where the rate is drawn from the seed between 12.5 and 14.5 phones per
second at length_scale 1 (phones: IPA symbols other than stress and length marks and spaces; pads,
spaces and marks still get their own durations, as in a trained voice). Everything else is Piper's
initialization, except the layers Piper starts at zero (the flows' ``post``, the ConvFlows' ``proj``),
which get small random weights so that voices differ in their flows too, and the decoder's last
convolution, scaled so that the voice is audible (:func:`calibrate_loudness`)."""
from __future__ import annotations

import math
from typing import Dict, Optional, Tuple

import torch
from torch import nn

from .config import VitsConfig
from .phonemes import default_phoneme_id_map, phone_count, to_ids
from .synthesizer import NOISE_W, Scales, SynthesizerTrn

CALIBRATION_PHONEMES = ('ðə nˈɔːɹθ wˈɪnd ænd ðə sˈʌn wɜː dɪspjˈuːɾɪŋ wˌɪtʃ wʌz ðə stɹˈɔŋɡɚ wˌɛn ɐ tɹˈævəlɚ '
                        'kˈeɪm ɐlˈɔŋ ɹˈæpt ɪn ɐ wˈɔːɹm klˈoʊk')
RATE_RANGE_PHONES_PER_SECOND = (12.5, 14.5)
CALIBRATION_NOISE_SEED = 1234
SMALL_INIT_STD = 0.02
LOUDNESS_RMS = 0.1
LOUDNESS_FRAMES = 24
LOUDNESS_PHONEMES = CALIBRATION_PHONEMES.split(' wɜː')[0]  # "the North Wind and the Sun"


def voice_seed(base_seed: int, index: int) -> int:
    return (base_seed * 1_000_003 + index) % (2 ** 63)


def random_state(config: VitsConfig, seed: int, device: Optional[torch.device] = None
                 ) -> Tuple[Dict[str, torch.Tensor], float]:
    """A random voice's state dict (fp32, CPU, inference names) and the speech rate it was calibrated to.
    The weights are drawn on the CPU (the same on every machine); ``device`` runs the calibration."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = SynthesizerTrn(config)
        with torch.no_grad():
            for flow in model.flow.flows:
                post = getattr(flow, 'post', None)
                if isinstance(post, nn.Conv1d):
                    nn.init.normal_(post.weight, 0.0, SMALL_INIT_STD)
                    if post.bias is not None:
                        nn.init.zeros_(post.bias)
            for flow in model.dp.flows:
                proj = getattr(flow, 'proj', None)
                if isinstance(proj, nn.Conv1d):
                    nn.init.normal_(proj.weight, 0.0, SMALL_INIT_STD)
                    if proj.bias is not None:
                        nn.init.zeros_(proj.bias)
        rate = RATE_RANGE_PHONES_PER_SECOND[0] + float(torch.rand(())) * (
            RATE_RANGE_PHONES_PER_SECOND[1] - RATE_RANGE_PHONES_PER_SECOND[0])
    model.eval()
    if device is not None:
        model.to(device)
    calibrate_durations(model, rate)
    calibrate_loudness(model)
    return {name: t.detach().to('cpu', copy=True) for name, t in model.state_dict().items()}, rate


def calibrate_loudness(model: SynthesizerTrn) -> None:
    """Scale ``dec.conv_post`` so that the voice's audio has an RMS of about ``LOUDNESS_RMS`` (random
    decoders are otherwise near silent), measured on the first frames of the calibration passage."""
    id_map = default_phoneme_id_map()
    ids = torch.tensor([to_ids(LOUDNESS_PHONEMES, id_map)], dtype=torch.long, device=_device_of(model))
    with torch.no_grad():
        z = model.encode(ids, Scales(), torch.Generator().manual_seed(CALIBRATION_NOISE_SEED))
        audio = model.decode(z[:, :, :LOUDNESS_FRAMES])
        rms = float(audio.pow(2).mean().sqrt())
        if rms > 0:
            model.dec.conv_post.weight.mul_(LOUDNESS_RMS / rms)


def calibration_frames(model: SynthesizerTrn) -> torch.Tensor:
    """Durations in frames (length_scale 1) of the calibration passage's symbols, before the final offset:
    the z0 values that the last flow turns into log-durations."""
    id_map = default_phoneme_id_map()
    ids = torch.tensor([to_ids(CALIBRATION_PHONEMES, id_map)], dtype=torch.long, device=_device_of(model))
    generator = torch.Generator().manual_seed(CALIBRATION_NOISE_SEED)
    with torch.no_grad():
        affine = model.dp.flows[0]
        m0 = float(affine.m[0, 0])
        scale = math.exp(-float(affine.logs[0, 0]))
        logw = model.log_durations(ids, NOISE_W, generator)[0, 0]
    return (logw / scale + m0).cpu()  # z0, the affine's input


def _device_of(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def calibrate_durations(model: SynthesizerTrn, phones_per_second: float) -> None:
    """Set ``dp.flows.0.m[0]`` so that the calibration passage is spoken at ``phones_per_second``."""
    id_map = default_phoneme_id_map()
    phones = phone_count(CALIBRATION_PHONEMES, id_map)
    hop = model.config.hop_samples
    target_frames = phones / phones_per_second * model.config.sample_rate / hop
    z0 = calibration_frames(model)
    scale = math.exp(-float(model.dp.flows[0].logs[0, 0]))

    def frames(m0: float) -> float:
        return float(torch.ceil(torch.exp((z0 - m0) * scale)).sum())

    lo, hi = -20.0, 20.0  # frames(lo) > target > frames(hi): frames falls as m0 rises
    for _ in range(60):
        mid = (lo + hi) / 2
        if frames(mid) > target_frames:
            lo = mid
        else:
            hi = mid
    with torch.no_grad():
        model.dp.flows[0].m[0, 0] = (lo + hi) / 2
