import re
from pathlib import Path
from typing import List

import pytest

from voxmux_host.errors import InstanceError
from voxmux_host.messages import WIRE_ERROR_CODE_VALUES as WIRE_ERROR_CODES

ERROR_CATALOG_TS = Path(__file__).resolve().parents[2] / 'src' / 'core' / 'error-catalog.ts'


def typescript_wire_codes() -> List[str]:
    source = ERROR_CATALOG_TS.read_text('utf-8')
    match = re.search(r'export const WIRE_ERROR_CODES = \[(.*?)\]', source, re.S)
    assert match, 'WIRE_ERROR_CODES not found in error-catalog.ts'
    return re.findall(r"'([a-z_]+)'", match.group(1))


def test_wire_error_codes_equal_the_typescript_list() -> None:
    assert list(WIRE_ERROR_CODES) == typescript_wire_codes()


def test_instance_error_carries_its_code_and_message() -> None:
    err = InstanceError('invalid_audio', 'Expected finite samples')
    assert (err.code, err.message, str(err)) == ('invalid_audio', 'Expected finite samples', 'Expected finite samples')


def test_instance_error_rejects_a_code_that_cannot_cross_the_wire() -> None:
    with pytest.raises(ValueError):
        InstanceError('queue_full', 'x')
