"""The VITS model of the vits adapter: Piper's parameter names and shapes, checkpoint loading and its errors,
windowed decoding against whole decoding, and the speech rate of calibrated random voices (CPU)."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import torch

from voxmux_host.errors import InstanceError
from voxmux_host.models.vits.checkpoint import (TRAINING_ONLY, fold_weight_norm, inference_state, layout_of,
                                                load_voice_file, pack, skeleton)
from voxmux_host.models.vits.config import MEDIUM, TINY
from voxmux_host.models.vits.phonemes import default_phoneme_id_map, phone_count, to_ids
from voxmux_host.models.vits.random_init import RATE_RANGE_PHONES_PER_SECOND, random_state
from voxmux_host.models.vits.synthesizer import Scales, SynthesizerTrn
from voxmux_host.models.vits.windows import plan_windows

KEYS = Path(__file__).resolve().parent / 'fixtures' / 'piper-medium-keys.txt'


def piper_medium_keys() -> Dict[str, Tuple[int, ...]]:
    """The 673 tensors of a Piper medium checkpoint's generator (``model_g.*``), with their shapes."""
    keys: Dict[str, Tuple[int, ...]] = {}
    for line in KEYS.read_text(encoding='utf-8').splitlines():
        name, shape = line.split('\t')
        keys[name] = tuple(int(d) for d in shape.strip('[]').split(','))
    return keys


def piper_checkpoint(keys: Dict[str, Tuple[int, ...]]) -> Dict[str, object]:
    """A Lightning checkpoint shaped like Piper's, with small random values (weight_g positive)."""
    generator = torch.Generator().manual_seed(0)
    state: Dict[str, torch.Tensor] = {}
    for name, shape in keys.items():
        tensor = torch.randn(shape, generator=generator) * 0.05
        state[name] = tensor.abs() + 0.1 if name.endswith('.weight_g') else tensor
    state['model_d.discriminators.0.convs.0.bias'] = torch.zeros(16)
    return {'state_dict': state, 'epoch': 3, 'global_step': 1000}


def tiny_model(seed: int = 1) -> SynthesizerTrn:
    state, _ = random_state(TINY, seed)
    model = SynthesizerTrn(TINY)
    model.load_state_dict(state)
    model.eval()
    return model


def test_medium_has_pipers_inference_parameters_by_name_and_shape() -> None:
    keys = piper_medium_keys()
    assert len(keys) == 673
    expected: Dict[str, Tuple[int, ...]] = {}
    for name, shape in keys.items():
        short = name[len('model_g.'):]
        if short.startswith(TRAINING_ONLY) or short.endswith('.weight_g'):
            continue
        expected[short[:-2] if short.endswith('.weight_v') else short] = shape
    layout = layout_of(skeleton(MEDIUM))
    assert layout.shape_of() == expected
    assert layout.numel == 15_772_216  # about 15.8 M inference parameters, 63.1 MB in fp32
    assert layout.dec_range[1] - layout.dec_range[0] == 1_662_976


def test_a_piper_medium_checkpoint_loads_with_weight_norm_folded(tmp_path: Path) -> None:
    checkpoint = piper_checkpoint(piper_medium_keys())
    layout = layout_of(skeleton(MEDIUM))
    raw = checkpoint['state_dict']
    assert isinstance(raw, dict)
    state = inference_state(raw, layout, 'test.ckpt')
    assert set(state) == set(layout.names)
    g, v = raw['model_g.dec.ups.0.weight_g'], raw['model_g.dec.ups.0.weight_v']
    folded = state['dec.ups.0.weight']
    torch.testing.assert_close(folded, fold_weight_norm(g, v))
    # weight norm (dim 0): each output slice of the folded weight has the norm g
    norms = torch.linalg.vector_norm(folded.reshape(folded.shape[0], -1), dim=1)
    torch.testing.assert_close(norms, g.reshape(-1))
    torch.testing.assert_close(state['enc_p.emb.weight'], raw['model_g.enc_p.emb.weight'])


def test_a_mismatched_checkpoint_names_every_missing_unexpected_and_mismatched_tensor() -> None:
    raw = dict(piper_checkpoint(piper_medium_keys())['state_dict'])  # type: ignore[call-overload]
    del raw['model_g.enc_p.encoder.attn_layers.3.conv_k.bias']
    del raw['model_g.flow.flows.2.enc.in_layers.1.weight_g']
    raw['model_g.emb_g.weight'] = torch.zeros(4, 512)
    raw['model_g.dec.conv_pre.weight'] = torch.zeros(256, 192, 5)
    raw['model_g.dp.flows.3.proj.bias'] = torch.zeros(30)
    raw['model_g.dec.ups.2.weight_v'] = torch.zeros(64, 32, 4)
    with pytest.raises(InstanceError) as caught:
        inference_state(raw, layout_of(skeleton(MEDIUM)), 'voice.ckpt')
    message = caught.value.message
    assert caught.value.code == 'load_failed'
    assert 'voice.ckpt' in message
    assert '2 missing: enc_p.encoder.attn_layers.3.conv_k.bias [192], flow.flows.2.enc.in_layers.1.weight_g [384, 1, 1]' in message
    assert '1 unexpected: emb_g.weight [4, 512]' in message
    assert ('3 with a different shape: dec.conv_pre.weight (got [256, 192, 5], expected [256, 192, 7]), '
            'dec.ups.2.weight_v (got [64, 32, 4], expected [64, 32, 8]), '
            'dp.flows.3.proj.bias (got [30], expected [29])') in message


def test_voice_files_load_as_lightning_checkpoints_and_plain_state_dicts(tmp_path: Path) -> None:
    layout = layout_of(skeleton(TINY))
    state, _ = random_state(TINY, 5)
    plain = tmp_path / 'plain.pt'
    torch.save(state, plain)
    ckpt = tmp_path / 'lightning.ckpt'
    torch.save({'state_dict': {f'model_g.{k}': v for k, v in state.items()}, 'epoch': 1}, ckpt)
    expected = pack(state, layout)
    torch.testing.assert_close(load_voice_file(str(plain), layout), expected)
    torch.testing.assert_close(load_voice_file(str(ckpt), layout), expected)
    with pytest.raises(InstanceError) as caught:
        load_voice_file(str(tmp_path / 'gone.pt'), layout)
    assert caught.value.code == 'resource_not_found'


def test_windowed_decoding_equals_whole_decoding() -> None:
    model = tiny_model()
    z = torch.randn(1, TINY.inter_channels, 200, generator=torch.Generator().manual_seed(0))
    hop = TINY.hop_samples
    windows = plan_windows(200)
    assert [(w.start, w.end, w.keep_start, w.keep_end) for w in windows] == [
        (0, 55, 0, 45), (35, 100, 10, 55), (80, 145, 10, 55), (125, 190, 10, 55), (170, 200, 10, 30)]
    with torch.no_grad():
        whole = model.decode(z)[0]
        batch = torch.zeros(len(windows), TINY.inter_channels, 65)
        mask = torch.zeros(len(windows), 1, 65)
        for row, w in enumerate(windows):
            batch[row, :, :w.frames] = z[0, :, w.start:w.end]
            mask[row, :, :w.frames] = 1
        decoded = model.decode(batch, mask)
    pieces: List[torch.Tensor] = [decoded[row, w.keep_start * hop:w.keep_end * hop] for row, w in enumerate(windows)]
    windowed = torch.cat(pieces)
    assert windowed.shape == whole.shape
    assert float((windowed - whole).abs().max()) < 1e-4
    assert float(whole.abs().max()) > 0.05  # audible, not silence


def test_a_masked_row_decodes_as_its_exact_length_alone() -> None:
    model = tiny_model()
    z = torch.randn(1, TINY.inter_channels, 23, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        alone = model.decode(z)[0]
        padded = torch.zeros(2, TINY.inter_channels, 65)
        padded[0, :, :23] = z[0]
        padded[1] = torch.randn(TINY.inter_channels, 65)
        mask = torch.zeros(2, 1, 65)
        mask[0, :, :23] = 1
        mask[1] = 1
        rows = model.decode(padded, mask)
    torch.testing.assert_close(rows[0, :alone.shape[0]], alone, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_random_voices_speak_at_a_realistic_rate(seed: int) -> None:
    # A passage other than the calibration one (IPA of "Please call Stella. Ask her to bring these things
    # with her from the store: six spoons of fresh snow peas, five thick slabs of blue cheese.").
    phonemes = ('plˈiːz kˈɔːl stˈɛlə ˈæsk hɜː tə bɹˈɪŋ ðiːz θˈɪŋz wɪð hɜː fɹʌm ðə stˈoːɹ sˈɪks spˈuːnz ʌv '
                'fɹˈɛʃ snˈoʊ pˈiːz fˈaɪv θˈɪk slˈæbz ʌv blˈuː tʃˈiːz')
    id_map = default_phoneme_id_map()
    ids = torch.tensor([to_ids(phonemes, id_map)])
    model = tiny_model(seed)
    rates = []
    for noise_seed in range(3):
        with torch.no_grad():
            z = model.encode(ids, Scales(), torch.Generator().manual_seed(noise_seed))
        seconds = z.shape[2] * TINY.hop_samples / TINY.sample_rate
        rates.append(phone_count(phonemes, id_map) / seconds)
    low, high = RATE_RANGE_PHONES_PER_SECOND
    assert low - 2.5 <= sum(rates) / len(rates) <= high + 2.5, rates
    with torch.no_grad():
        slow = model.encode(ids, Scales(length_scale=2.0), torch.Generator().manual_seed(0))
    assert slow.shape[2] > 1.7 * model.encode(ids, Scales(), torch.Generator().manual_seed(0)).shape[2]


def test_random_voices_differ_and_repeat_by_seed() -> None:
    a, _ = random_state(TINY, 10)
    b, _ = random_state(TINY, 11)
    again, _ = random_state(TINY, 10)
    assert all(torch.equal(a[k], again[k]) for k in a)
    assert not torch.equal(a['dec.conv_pre.weight'], b['dec.conv_pre.weight'])
    assert not torch.equal(a['flow.flows.0.post.weight'], b['flow.flows.0.post.weight'])


def test_a_missing_weight_v_is_named_once() -> None:
    # The weight_g-only case (weight_v deleted) mirrors the weight_v-only case of the test above, which
    # names its one missing tensor once: so must this one (one tensor missing, "1 missing").
    raw = dict(piper_checkpoint(piper_medium_keys())['state_dict'])  # type: ignore[call-overload]
    del raw['model_g.dec.ups.1.weight_v']
    with pytest.raises(InstanceError) as caught:
        inference_state(raw, layout_of(skeleton(MEDIUM)), 'voice.ckpt')
    message = caught.value.message
    assert '1 missing: dec.ups.1.weight_v [128, 64, 16]' in message, message
