"""Speaker statistics: a diagonal Gaussian of MFCCs held as sufficient statistics (frame count, sum, sum
of squares), and the symmetric Kullback-Leibler divergence (KL2) between two of them, the classical
distance of speaker change detection and clustering (Siegler et al. 1997).

Sums add, so a speaker's model is the sum of its segments' statistics, updated as segments are
assigned; KL2 ignores a constant shift of every frame, so no per-recording normalization is needed
(which an online engine could not do before it had heard the whole recording).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

#: Cepstra used: c1..c19 (c0 is loudness, which says more about the microphone than the speaker).
FIRST_CEPSTRUM = 1
#: Variance floor, in squared cepstral units: keeps a short segment's near-constant dimension from dominating.
VARIANCE_FLOOR = 0.05


@dataclass(frozen=True)
class Gaussian:
    count: float
    total: NDArray[np.float64]  # [dims] sum of frames
    squares: NDArray[np.float64]  # [dims] sum of squared frames

    @staticmethod
    def of(frames: NDArray[np.float64]) -> 'Gaussian':
        """The statistics of ``frames`` [n, CEPSTRA] (their c1.. columns)."""
        x = frames[:, FIRST_CEPSTRUM:]
        return Gaussian(float(x.shape[0]), x.sum(axis=0), (x * x).sum(axis=0))

    def __add__(self, other: 'Gaussian') -> 'Gaussian':
        return Gaussian(self.count + other.count, self.total + other.total, self.squares + other.squares)

    @property
    def mean(self) -> NDArray[np.float64]:
        return self.total / max(self.count, 1.0)

    @property
    def variance(self) -> NDArray[np.float64]:
        mean = self.mean
        return np.maximum(self.squares / max(self.count, 1.0) - mean * mean, VARIANCE_FLOOR)


def kl2(a: Gaussian, b: Gaussian) -> float:
    """The symmetric KL divergence between two diagonal Gaussians, per dimension."""
    va, vb = a.variance, b.variance
    d2 = (a.mean - b.mean) ** 2
    return float(0.5 * np.mean(va / vb + vb / va - 2.0 + d2 * (1.0 / va + 1.0 / vb)))


def kl2_matrix(models: 'list[Gaussian]') -> NDArray[np.float64]:
    """[n, n] pairwise KL2 of ``models``, symmetric with a zero diagonal.

    Expanded into matrix products so that memory stays O(n^2) (not n^2 x dims): an hour's 1,800
    pieces need a few tens of MB."""
    if not models:
        return np.zeros((0, 0))
    mean = np.stack([m.mean for m in models])
    var = np.stack([m.variance for m in models])
    inv = 1.0 / var
    mean2 = mean * mean
    # sum_k va/vb + vb/va
    ratios = var @ inv.T + inv @ var.T
    # sum_k (ma - mb)^2 (1/va + 1/vb), with (ma - mb)^2 = ma^2 - 2 ma mb + mb^2
    own = np.sum(mean2 * inv, axis=1)
    squares = (own[:, None] + mean2 @ inv.T - 2.0 * (mean * inv) @ mean.T - 2.0 * mean @ (mean * inv).T
               + inv @ mean2.T + own[None, :])
    distance = 0.5 * (ratios - 2.0 * mean.shape[1] + squares) / mean.shape[1]
    distance = np.maximum(0.5 * (distance + distance.T), 0.0)
    np.fill_diagonal(distance, 0.0)
    return np.asarray(distance, dtype=np.float64)


def log_likelihood(model: Gaussian) -> float:
    """The log-likelihood of a model's own frames under its maximum-likelihood diagonal Gaussian, up to a
    constant per frame: -n/2 sum(log variance)."""
    return float(-0.5 * model.count * np.sum(np.log(model.variance)))


def delta_bic(a: Gaussian, b: Gaussian, penalty: float) -> float:
    """The Bayesian information criterion's gain from modelling ``a`` and ``b`` as one speaker rather than
    two (Chen and Gopalakrishnan 1998, diagonal covariances): negative when one model explains both
    well enough, for a penalty weight ``penalty`` (lambda, 1 in the paper)."""
    joined = a + b
    dims = a.total.size
    parameters = 2 * dims  # a mean and a variance per dimension
    return (log_likelihood(a) + log_likelihood(b) - log_likelihood(joined)
            - penalty * 0.5 * parameters * float(np.log(joined.count)))
