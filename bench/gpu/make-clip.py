"""Writes a deterministic speech-shaped test clip: 16 kHz mono 16-bit WAV of the given length.

Usage: python3 bench/gpu/make-clip.py OUT.wav SECONDS
Model cost does not depend on what is said (random weights); the clip is band-limited noise with
a syllable-rate envelope so that front-end statistics resemble speech.
"""
import sys
import wave

import numpy as np


def main() -> None:
    path, seconds = sys.argv[1], float(sys.argv[2])
    rate = 16000
    n = int(seconds * rate)
    rng = np.random.default_rng(45)
    noise = rng.standard_normal(n).astype(np.float32)
    kernel = np.hanning(31).astype(np.float32)
    voiced = np.convolve(noise, kernel / kernel.sum(), mode='same')
    t = np.arange(n, dtype=np.float32) / rate
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 4.0 * t) ** 2
    signal = voiced * envelope
    signal = 0.3 * signal / np.max(np.abs(signal))
    pcm = (signal * 32767).astype('<i2')
    with wave.open(path, 'wb') as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(pcm.tobytes())


if __name__ == '__main__':
    main()
