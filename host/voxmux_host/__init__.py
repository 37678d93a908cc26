"""voxmux model host: one instance process speaking docs/protocol.md on fds 3 and 4."""

__version__ = '0.1.0'
