"""Checks shared by the adapters' load options: unknown keys, JSON integers and numbers (a bool is
neither), and the ``device`` option (``auto``, ``cpu``, ``cuda`` or ``cuda:N``) as a torch device."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Dict, Mapping

from .errors import InstanceError

if TYPE_CHECKING:  # torch is imported where a device is resolved: the CPU engines' hosts never load it
    import torch


def with_defaults(raw: Mapping[str, Any], defaults: Mapping[str, Any], adapter: str) -> Dict[str, Any]:
    """The options given over the adapter's defaults; InstanceError('load_failed') naming every key that
    is not one of the defaults' and the keys that are."""
    unknown = sorted(set(raw) - set(defaults))
    if unknown:
        raise InstanceError('load_failed', f"Unknown {adapter} option(s): {', '.join(unknown)}; "
                                           f"known: {', '.join(sorted(defaults))}")
    return {**defaults, **raw}


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def resolve_device(name: str) -> 'torch.device':
    """``auto`` is the first GPU when CUDA is available, else the CPU; ``cuda`` is ``cuda:0``.

    Raises InstanceError('load_failed') for another name, or a CUDA device without CUDA."""
    import torch  # noqa: F811 - at call time (see the import above)

    if name == 'auto':
        return torch.device('cuda:0' if torch.cuda.is_available() else 'cpu')
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise InstanceError('load_failed', f'Expected device to be auto, cpu, cuda or cuda:N: got {name!r}') from err
    if device.type == 'cuda':
        if not torch.cuda.is_available():
            raise InstanceError('load_failed', f'Expected a CUDA device for device {name!r}: CUDA is not available')
        if device.index is None:
            device = torch.device('cuda', 0)
    elif device.type != 'cpu':
        raise InstanceError('load_failed', f'Expected device to be auto, cpu, cuda or cuda:N: got {name!r}')
    return device
