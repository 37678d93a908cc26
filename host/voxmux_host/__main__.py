"""``python3 -m voxmux_host --adapter NAME [--probe-interval-ms N] [--probe-timeout-ms N]``

Frames are read from fd 3 and written to fd 4 (docs/protocol.md, Transport); logs go to
stderr as JSON lines. Exit codes: 0 after Close or end of input, 1 a bug in the host, 2 bad arguments, 3 bad_frame.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from .host import (
    DEFAULT_PROBE_INTERVAL_MS,
    DEFAULT_PROBE_TIMEOUT_MS,
    EXIT_BAD_ARGUMENTS,
    EXIT_CRASHED,
    GIL_SWITCH_INTERVAL_S,
    HostDeps,
    HostOptions,
    InstanceHost,
)
from .input_stream import open_input, widen_pipe
from .log import LEVELS, Logger
from .registry import adapter_names

INPUT_FD = 3
OUTPUT_FD = 4


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f'Expected a non-negative integer: got {text}')
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f'Expected a positive integer: got {text}')
    return value


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog='voxmux_host', description='A voxmux model-host instance.')
    parser.add_argument('--adapter', required=True, choices=adapter_names(), help='the model adapter to serve')
    parser.add_argument('--probe-interval-ms', type=_non_negative, default=DEFAULT_PROBE_INTERVAL_MS,
                        help='milliseconds between health probes; 0 turns the probe off')
    parser.add_argument('--probe-timeout-ms', type=_positive, default=DEFAULT_PROBE_TIMEOUT_MS,
                        help='milliseconds a probe may take before the instance counts as wedged')
    parser.add_argument('--log-level', choices=list(LEVELS), default='info')
    return parser.parse_args(argv)  # exits with code 2 on bad arguments


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    log = Logger(sys.stderr, args.log_level)
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)  # see host.py: the threads share one GIL
    for fd in (INPUT_FD, OUTPUT_FD):
        try:
            os.fstat(fd)
        except OSError:
            log.fatal('missing protocol pipe', fd=fd)
            return EXIT_BAD_ARGUMENTS
    options = HostOptions(args.adapter, args.probe_interval_ms, args.probe_timeout_ms)
    widen_pipe(OUTPUT_FD)
    stream = open_input(INPUT_FD)
    host = InstanceHost(options, HostDeps(input=stream, output_fd=OUTPUT_FD, log=log))
    try:
        return host.run()
    except Exception as err:
        log.fatal('instance failed', err=err)
        return EXIT_CRASHED


if __name__ == '__main__':
    sys.exit(main())
