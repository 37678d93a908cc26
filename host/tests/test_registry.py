import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from voxmux_host.errors import InstanceError
from voxmux_host.model_api import Adapter
from voxmux_host.registry import ADAPTERS, adapter_names, create_adapter

HOST_DIR = Path(__file__).resolve().parents[1]


def test_registry_names_the_adapters() -> None:
    assert adapter_names() == ['classical-diarizer', 'debian-voices', 'parakeet', 'pocketsphinx', 'sortformer', 'test', 'vits', 'whisper']


def test_create_adapter_fails_with_load_failed_for_an_unknown_name() -> None:
    with pytest.raises(InstanceError) as caught:
        create_adapter('nope')
    assert caught.value.code == 'load_failed' and "'nope'" in caught.value.message


def test_create_adapter_fails_with_load_failed_when_the_module_is_missing() -> None:
    def missing() -> Adapter:
        importlib.import_module('voxmux_host.models.not_written_yet')

        raise AssertionError('unreachable')

    with pytest.raises(InstanceError) as caught:
        create_adapter('ghost', {'ghost': missing})
    assert caught.value.code == 'load_failed'
    assert "Adapter 'ghost' is not available" in caught.value.message
    assert 'not_written_yet' in caught.value.message


def test_the_test_adapter_and_the_host_import_neither_torch_nor_pocketsphinx() -> None:
    code = (
        'import sys\n'
        'import voxmux_host.host, voxmux_host.__main__\n'
        'from voxmux_host.registry import create_adapter\n'
        "create_adapter('test')\n"
        "print(sorted(m for m in ('torch', 'pocketsphinx') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, '-c', code], cwd=HOST_DIR, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == '[]'


def test_every_registered_factory_is_callable() -> None:
    assert all(callable(factory) for factory in ADAPTERS.values())
