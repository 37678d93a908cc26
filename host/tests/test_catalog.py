"""The optional adapter methods ``catalog()`` and ``resource_counters()``, as the host converts them (#18)."""
from __future__ import annotations

from typing import Any, Dict

import pytest

from voxmux_host.errors import InstanceError
from voxmux_host.fakes.test_engine import TestEngineAdapter, catalog_entry
from voxmux_host.model_api import CatalogEntry, LoadContext, ResourceCounters, to_catalog, to_resource_counters


def entry(**overrides: Any) -> Dict[str, Any]:
    return {'name': 'flite-slt', 'kind': 'voice', 'language': 'en-US', 'sampleRate': 16000, 'gender': 'female',
            'description': 'CMU Arctic SLT', **overrides}


def test_to_catalog_turns_plain_dicts_into_records_in_order() -> None:
    assert to_catalog([entry(), entry(name='espeak-en-us', gender=None, sampleRate=22050)]) == (
        CatalogEntry('flite-slt', 'voice', 'en-US', 16000, 'female', 'CMU Arctic SLT'),
        CatalogEntry('espeak-en-us', 'voice', 'en-US', 22050, None, 'CMU Arctic SLT'),
    )
    assert to_catalog([]) == ()
    record = CatalogEntry('a', 'voice', 'en-GB', 8000, None, '')
    assert to_catalog((record,)) == (record,)


@pytest.mark.parametrize('raw, needle', [
    ({'name': 'x'}, 'list'),
    (['flite-slt'], 'catalog()[0] to be an object'),
    ([entry(extra=1)], "unknown ['extra']"),
    ([{k: v for k, v in entry().items() if k != 'language'}], "missing ['language']"),
    ([entry(sampleRate=0)], 'sampleRate'),
    ([entry(sampleRate=True)], 'sampleRate'),
    ([entry(sampleRate=16000.0)], 'sampleRate'),
    ([entry(gender=1)], 'gender'),
    ([entry(description=None)], 'description'),
    ([entry(name='')], 'unique non-empty name'),
    ([entry(), entry()], 'catalog()[1] to have a unique'),
])
def test_to_catalog_fails_a_malformed_catalogue_with_load_failed(raw: Any, needle: str) -> None:
    with pytest.raises(InstanceError) as caught:
        to_catalog(raw)
    assert caught.value.code == 'load_failed' and needle in caught.value.message


def test_to_resource_counters_fills_missing_keys_with_zero_and_rounds_counts() -> None:
    assert to_resource_counters({}) == ResourceCounters(0, 0, 0, 0, 0, 0.0, 0.0, 0, 0)
    counters = to_resource_counters({'hits': 3.0, 'misses': 2, 'loadsFromDisk': 1, 'loadsFromHost': 1,
                                     'evictions': 1, 'diskLoadMs': 12.5, 'hostLoadMs': 1, 'budgetBytes': 1e9,
                                     'residentBytes': 5})
    assert counters == ResourceCounters(3, 2, 1, 1, 1, 12.5, 1.0, 1_000_000_000, 5)
    assert isinstance(counters.hits, int) and isinstance(counters.host_load_ms, float)


@pytest.mark.parametrize('raw', [None, [], {'hitz': 1}, {'hits': -1}, {'hits': 'x'}, {'hits': True},
                                 {'diskLoadMs': float('nan')}, {'diskLoadMs': float('inf')}])
def test_to_resource_counters_rejects_unknown_keys_and_bad_values(raw: Any) -> None:
    with pytest.raises(ValueError):
        to_resource_counters(raw)


def test_the_test_engine_declares_its_voices_option_as_its_catalogue() -> None:
    adapter = TestEngineAdapter()
    adapter.load(LoadContext('i', 'm', {'voices': ['a', {'name': 'raw'}]}))
    assert adapter.catalog() == [catalog_entry('a'), {'name': 'raw'}]
    assert to_catalog([catalog_entry('a')])[0] == CatalogEntry('a', 'voice', 'en-US', 16000, None, 'Test voice a')
    with pytest.raises(InstanceError) as caught:
        TestEngineAdapter().load(LoadContext('i', 'm', {'voices': 'a'}))
    assert caught.value.code == 'load_failed'


def test_the_test_engine_loads_a_catalogue_voice_by_name_and_counts_hits_and_misses() -> None:
    adapter = TestEngineAdapter()
    adapter.load(LoadContext('i', 'm', {'voices': ['a', 'b'], 'voiceBytes': 7}))
    assert adapter.load_resource('a', 'voice', {}).source == 'disk'
    assert adapter.load_resource('a', 'voice', {}).source == 'resident'
    with pytest.raises(InstanceError) as caught:
        adapter.load_resource('z', 'voice', {})
    assert caught.value.code == 'resource_not_found'
    counters = adapter.resource_counters()
    assert (counters['hits'], counters['misses'], counters['loadsFromDisk'], counters['residentBytes'],
            counters['budgetBytes']) == (1, 1, 1, 7, 0)
