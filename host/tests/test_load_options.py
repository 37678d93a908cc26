"""The adapters' shared load-option checks: unknown keys, integers, finite numbers, and the device option."""
from __future__ import annotations

import math

import pytest
import torch

from voxmux_host.errors import InstanceError
from voxmux_host.load_options import is_int, is_number, resolve_device, with_defaults


def test_a_bool_is_neither_an_integer_nor_a_number_and_a_non_finite_float_is_no_number() -> None:
    assert is_int(3) and not is_int(True) and not is_int(3.0)
    assert is_number(3) and is_number(0.5) and not is_number(False)
    assert not is_number(math.inf) and not is_number(math.nan)


def test_the_device_is_auto_cpu_or_cuda_and_anything_else_fails_the_load() -> None:
    assert resolve_device('cpu') == torch.device('cpu')
    assert resolve_device('auto').type == ('cuda' if torch.cuda.is_available() else 'cpu')
    for name in ('tpu', 'not a device', 'meta'):
        with pytest.raises(InstanceError) as failed:
            resolve_device(name)
        assert failed.value.code == 'load_failed' and 'Expected device' in str(failed.value)
    if not torch.cuda.is_available():
        with pytest.raises(InstanceError, match='CUDA is not available'):
            resolve_device('cuda')


def test_options_go_over_the_defaults_and_every_unknown_key_is_named_with_the_known_ones() -> None:
    defaults = {'beta': 1, 'alpha': 2}
    assert with_defaults({'beta': 5}, defaults, 'demo') == {'beta': 5, 'alpha': 2}
    with pytest.raises(InstanceError) as failed:
        with_defaults({'zeta': 1, 'beta': 0, 'gamma': 2}, defaults, 'demo')
    assert failed.value.code == 'load_failed'
    assert failed.value.message == 'Unknown demo option(s): gamma, zeta; known: alpha, beta'
