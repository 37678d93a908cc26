"""The ``debian-voices`` adapter: speech synthesis on the CPU with the voices of Debian's main archive
(flite in process, Festival in a long-lived process, eSpeak NG in process). See adapter.py."""
