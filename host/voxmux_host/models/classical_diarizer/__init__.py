"""The ``classical-diarizer`` adapter: speaker diarization on the CPU from classical parts (voice activity,
MFCC speaker statistics, KL2 change detection, agglomerative clustering), offline for a whole file and online
for a session (adapter.py)."""
