"""Voice weight files: reading a Piper checkpoint or a voice file, folding weight norm, checking every tensor
against the model, and packing a voice's weights into one flat tensor.

A file is either a Piper Lightning checkpoint (``.ckpt``: ``{"state_dict": {"model_g.<name>": ...,
"model_d.<name>": ...}, ...}``) or a plain state dict (``.pt``, the keys with or without ``model_g.``). The
discriminator (``model_d.*``) and the generator's training-only modules (``enc_q.*``, ``dp.post_*``) are
skipped; ``<name>.weight_g``/``<name>.weight_v`` pairs (weight norm) are folded into ``<name>.weight`` =
g * v / ||v|| (norm over every axis but the first, as ``torch.nn.utils.weight_norm`` with dim 0). Anything
else must match the model exactly: the error names every missing, unexpected and wrongly shaped tensor.

One flat tensor per voice (parameters in ``named_parameters`` order) makes a voice one allocation: one
host->device copy to make it resident, one free to evict it, its size known exactly; the modules that run
it are views into it (:func:`bind`). The decoder's parameters are one contiguous range of it
(:attr:`Layout.dec_range`), which the CUDA graphs copy into their own weights before each replay."""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Tuple

import torch
from torch import nn

from voxmux_host.errors import InstanceError

from .config import VitsConfig
from .synthesizer import SynthesizerTrn

PREFIX = 'model_g.'
TRAINING_ONLY = ('enc_q.', 'dp.post_')


@dataclass(frozen=True)
class Layout:
    """Where each parameter lives in a voice's flat tensor."""

    names: Tuple[str, ...]
    shapes: Tuple[Tuple[int, ...], ...]
    offsets: Tuple[int, ...]
    numel: int
    dec_range: Tuple[int, int]

    @property
    def bytes_fp32(self) -> int:
        return self.numel * 4

    def shape_of(self) -> Dict[str, Tuple[int, ...]]:
        return dict(zip(self.names, self.shapes))


def skeleton(config: VitsConfig) -> SynthesizerTrn:
    """The model on the meta device (no memory): the template that :func:`bind` copies."""
    model = SynthesizerTrn(config).to('meta')
    model.eval()
    return model


def layout_of(model: nn.Module) -> Layout:
    names: List[str] = []
    shapes: List[Tuple[int, ...]] = []
    offsets: List[int] = []
    offset = 0
    dec_lo, dec_hi = -1, -1
    for name, param in model.named_parameters():
        if name.startswith('dec.'):
            dec_lo = offset if dec_lo < 0 else dec_lo
            dec_hi = offset + param.numel()
        names.append(name)
        shapes.append(tuple(param.shape))
        offsets.append(offset)
        offset += param.numel()
    return Layout(tuple(names), tuple(shapes), tuple(offsets), offset, (dec_lo, dec_hi))


def bind(template: nn.Module, flat: torch.Tensor, layout: Layout, prefix: str = '') -> nn.Module:
    """A copy of ``template`` (or of its submodule at ``prefix``) whose parameters are views into ``flat``
    (no copy of the weights). ``flat`` holds the whole voice unless ``prefix`` is given, in which case it
    holds that submodule's range only."""
    module = copy.deepcopy(template.get_submodule(prefix.rstrip('.')) if prefix else template)
    base = 0
    if prefix:
        base = layout.offsets[next(i for i, name in enumerate(layout.names) if name.startswith(prefix))]
    by_name = dict(zip(layout.names, zip(layout.offsets, layout.shapes)))
    for owner_name, owner in module.named_modules():
        for param_name, param in list(owner._parameters.items()):
            if param is None:
                continue
            full = prefix + (f'{owner_name}.' if owner_name else '') + param_name
            offset, shape = by_name[full]
            numel = param.numel()
            view = flat[offset - base:offset - base + numel].view(shape)
            owner._parameters[param_name] = nn.Parameter(view, requires_grad=False)
    return module


def pack(state: Mapping[str, torch.Tensor], layout: Layout) -> torch.Tensor:
    """The checked state dict (:func:`inference_state`) as one flat fp32 CPU tensor in layout order."""
    flat = torch.empty(layout.numel, dtype=torch.float32)
    for name, offset, shape in zip(layout.names, layout.offsets, layout.shapes):
        tensor = state[name]
        flat[offset:offset + tensor.numel()].copy_(tensor.reshape(-1))
    return flat


def unpack(flat: torch.Tensor, layout: Layout) -> Dict[str, torch.Tensor]:
    return {name: flat[offset:offset + _numel(shape)].view(shape).clone()
            for name, offset, shape in zip(layout.names, layout.offsets, layout.shapes)}


def read_file(path: str) -> Dict[str, torch.Tensor]:
    """The tensors of a voice file, keyed as in the file (``model_g.`` kept)."""
    try:
        obj = _torch_load(path)
    except FileNotFoundError as err:
        raise InstanceError('resource_not_found', f'Voice file {path} is gone: {err}') from err
    except Exception as err:  # noqa: BLE001 - any unreadable file is a failed load
        raise InstanceError('load_failed', f'Could not read voice file {path}: {type(err).__name__}: {err}') from err
    if isinstance(obj, dict) and isinstance(obj.get('state_dict'), dict):
        obj = obj['state_dict']
    if not isinstance(obj, dict):
        raise InstanceError('load_failed', f'Expected voice file {path} to hold a state dict: got {type(obj).__name__}')
    return {str(k): v for k, v in obj.items()}


def _torch_load(path: str) -> Any:
    # A .pt voice is tensors only: load it without running pickled code (torch >= 1.13). A Lightning
    # .ckpt also pickles its hyperparameters and loop state, which the restricted loader may refuse: it
    # is then read in full, so voicesDir must hold trusted files only (docs/adapters.md).
    try:
        return torch.load(path, map_location='cpu', weights_only=True)
    except TypeError:  # no weights_only before 1.13
        return torch.load(path, map_location='cpu')
    except Exception:
        if not path.endswith('.ckpt'):
            raise
        return torch.load(path, map_location='cpu', weights_only=False)


def inference_state(raw: Mapping[str, Any], layout: Layout, source: str) -> Dict[str, torch.Tensor]:
    """Strip ``model_g.``, skip the discriminator and training-only tensors, fold weight norm, and check
    every tensor against the model: load_failed naming every missing, unexpected and mismatched one."""
    given: Dict[str, Any] = {}
    for key, value in raw.items():
        if key.startswith('model_d.'):
            continue
        name = key[len(PREFIX):] if key.startswith(PREFIX) else key
        if name.startswith(TRAINING_ONLY):
            continue
        given[name] = value
    expected = layout.shape_of()
    state: Dict[str, torch.Tensor] = {}
    missing: List[str] = []
    unexpected: List[str] = []
    mismatched: List[str] = []
    not_tensors = sorted(name for name, value in given.items() if not isinstance(value, torch.Tensor))
    tensors = {name: value for name, value in given.items() if isinstance(value, torch.Tensor)}
    for name, value in tensors.items():
        if name.endswith('.weight_g'):
            continue  # handled with its weight_v
        if name.endswith('.weight_v'):
            base = name[:-2]
            g_name = base + '_g'
            if base not in expected:
                unexpected.append(f'{name} {list(value.shape)}')
                if g_name in tensors:
                    unexpected.append(f'{g_name} {list(tensors[g_name].shape)}')
                continue
            want = expected[base]
            g = tensors.get(g_name)
            ok = True
            if tuple(value.shape) != want:
                mismatched.append(f'{name} (got {list(value.shape)}, expected {list(want)})')
                ok = False
            want_g = (want[0],) + (1,) * (len(want) - 1)
            if g is None:
                missing.append(f'{g_name} {list(want_g)}')
                ok = False
            elif tuple(g.shape) != want_g:
                mismatched.append(f'{g_name} (got {list(g.shape)}, expected {list(want_g)})')
                ok = False
            if base in tensors:
                unexpected.append(f'{base} {list(tensors[base].shape)} (beside {name})')
                ok = False
            if ok and g is not None:
                state[base] = fold_weight_norm(g, value)
            elif base not in state:
                state[base] = torch.empty(0)  # reported already; keeps it off the missing list
            continue
        if name not in expected:
            unexpected.append(f'{name} {list(value.shape)}')
            continue
        if tuple(value.shape) != expected[name]:
            mismatched.append(f'{name} (got {list(value.shape)}, expected {list(expected[name])})')
            state[name] = torch.empty(0)  # reported already; keeps it off the missing list
            continue
        state[name] = value.detach().to(torch.float32)
    for name, value in tensors.items():
        if name.endswith('.weight_g') and name[:-2] + '_v' not in tensors:
            base = name[:-2]
            if base in expected:
                missing.append(f'{base}_v {list(expected[base])}')
                state[base] = torch.empty(0)  # reported already; keeps it off the missing list
            else:
                unexpected.append(f'{name} {list(value.shape)}')
    for name, shape in expected.items():
        if name not in state:
            missing.append(f'{name} {list(shape)}' + (' (or weight_g/weight_v)' if name.endswith('.weight') else ''))
    parts = []
    for label, names in (('missing', missing), ('unexpected', unexpected), ('with a different shape', mismatched),
                         ('not tensors', not_tensors)):
        if names:
            parts.append(f'{len(names)} {label}: {", ".join(sorted(names))}')
    if parts:
        raise InstanceError('load_failed', f'Voice weights {source} do not match the model: ' + '; '.join(parts))
    return state


def fold_weight_norm(g: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    g32 = g.detach().to(torch.float32)
    v32 = v.detach().to(torch.float32)
    norm = torch.linalg.vector_norm(v32.reshape(v32.shape[0], -1), dim=1).reshape((-1,) + (1,) * (v32.dim() - 1))
    folded: torch.Tensor = g32 * v32 / norm
    return folded


def load_voice_file(path: str, layout: Layout) -> torch.Tensor:
    """Read, check and pack one voice file: its flat fp32 CPU tensor."""
    return pack(inference_state(read_file(path), layout, os.path.basename(path)), layout)


def _numel(shape: Tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
