import sys
from pathlib import Path

HOST_DIR = Path(__file__).resolve().parents[1]
if str(HOST_DIR) not in sys.path:
    sys.path.insert(0, str(HOST_DIR))

from typing import Callable, Iterator, List, Sequence  # noqa: E402

import pytest  # noqa: E402

from host_process import HostProcess  # noqa: E402


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[[Sequence[str]], HostProcess]]:
    """Starts processes with protocol pipes; kills any still running when the test ends."""
    started: List[HostProcess] = []

    def start(argv: Sequence[str]) -> HostProcess:
        process = HostProcess(argv, tmp_path / f'stderr-{len(started)}.log')
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()
