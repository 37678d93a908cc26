"""The adapters a host can serve, by name. Each factory imports its module only when called,
so that starting a host for one adapter never imports another's dependencies (torch,
pocketsphinx)."""
from __future__ import annotations

from typing import Callable, Dict, Mapping

from .errors import InstanceError
from .model_api import Adapter

AdapterFactory = Callable[[], Adapter]


def _classical_diarizer() -> Adapter:
    from .models.classical_diarizer.adapter import ClassicalDiarizerAdapter

    return ClassicalDiarizerAdapter()


def _debian_voices() -> Adapter:
    from .models.debian_voices.adapter import DebianVoicesAdapter

    return DebianVoicesAdapter()


def _parakeet() -> Adapter:
    from .models.parakeet.adapter import ParakeetAdapter

    adapter: Adapter = ParakeetAdapter()
    return adapter


def _pocketsphinx() -> Adapter:
    from .models.pocketsphinx_asr import PocketsphinxAdapter

    return PocketsphinxAdapter()


def _vits() -> Adapter:
    from .models.vits.adapter import VitsAdapter

    return VitsAdapter()


def _sortformer() -> Adapter:
    from .models.sortformer.adapter import SortformerAdapter

    adapter: Adapter = SortformerAdapter()
    return adapter


def _whisper() -> Adapter:
    from .models.whisper.adapter import WhisperAdapter

    adapter: Adapter = WhisperAdapter()
    return adapter


def _test() -> Adapter:
    from .fakes.test_engine import TestEngineAdapter

    return TestEngineAdapter()


ADAPTERS: Dict[str, AdapterFactory] = {
    'classical-diarizer': _classical_diarizer,
    'debian-voices': _debian_voices,
    'parakeet': _parakeet,
    'pocketsphinx': _pocketsphinx,
    'sortformer': _sortformer,
    'test': _test,
    'vits': _vits,
    'whisper': _whisper,
}


def adapter_names(registry: Mapping[str, AdapterFactory] = ADAPTERS) -> list[str]:
    return sorted(registry)


def create_adapter(name: str, registry: Mapping[str, AdapterFactory] = ADAPTERS) -> Adapter:
    """Import and construct the named adapter.

    Raises InstanceError('load_failed') when the name is unknown or its module cannot be
    imported (a missing optional dependency, or an adapter that is not installed).
    """
    factory = registry.get(name)
    if factory is None:
        raise InstanceError('load_failed', f'Expected an adapter name ({", ".join(sorted(registry))}): got {name!r}')
    try:
        return factory()
    except ImportError as err:
        raise InstanceError('load_failed', f"Adapter '{name}' is not available: {type(err).__name__}: {err}") from err
