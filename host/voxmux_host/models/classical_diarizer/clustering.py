"""Who speaks in each piece: offline clustering of a whole recording, and online assignment for
sessions.

Offline, the pieces long enough to carry speaker statistics are clustered bottom-up with average
linkage on their pairwise KL2 (scikit-learn's AgglomerativeClustering on the precomputed distances),
stopped at a distance threshold and held within [minSpeakers, maxSpeakers]. The clusters' pooled
models are then merged while the BIC prefers one model to two, clusters with too little speech to be a
speaker's are dissolved, and every piece, the short ones included, goes to the nearest pooled model.

Online, each finished piece, in time order, joins the speaker whose latest pieces are nearest on
average (the distance of average linkage) when it is close enough, and opens a new speaker otherwise
(while fewer than maxSpeakers exist); a speaker opened in a chunk with too little speech in it is taken
back (:func:`settle_new_speakers`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np
from sklearn.cluster import AgglomerativeClustering

from .statistics import Gaussian, delta_bic, kl2, kl2_matrix


@dataclass(frozen=True)
class Limits:
    min_speakers: int
    max_speakers: int


@dataclass(frozen=True)
class Thresholds:
    #: Average-linkage KL2 at which offline clustering stops.
    cluster: float
    #: BIC penalty weight (lambda) of merging offline clusters.
    merge: float
    #: Average-linkage KL2 under which an online piece joins an existing speaker.
    assign: float
    #: Frames a piece needs to take part in clustering or to update a speaker model.
    min_frames: int
    #: Frames a cluster needs to stand as a speaker of its own offline.
    min_speaker_frames: int
    #: Frames a speaker opened online needs within its first chunk to stay (a chunk holds less of a new
    #: speaker's speech than a whole file does, so the bar is lower than offline).
    min_new_speaker_frames: int


def nearest(model: Gaussian, speakers: Sequence[Gaussian]) -> tuple[int, float]:
    """The index of the speaker model nearest ``model`` and its KL2 (the first one on a tie)."""
    distances = [kl2(model, speaker) for speaker in speakers]
    best = int(np.argmin(distances))
    return best, distances[best]


def _pool(models: Sequence[Gaussian], labels: Sequence[int], count: int) -> List[Gaussian]:
    pooled: List[Optional[Gaussian]] = [None] * count
    for model, label in zip(models, labels):
        current = pooled[label]
        pooled[label] = model if current is None else current + model
    return [m for m in pooled if m is not None]


def cluster_offline(models: Sequence[Gaussian], limits: Limits, thresholds: Thresholds) -> List[int]:
    """A speaker per piece (ids from 0 in order of first appearance) from the pieces' statistics, in time
    order."""
    if not models:
        return []
    usable = [i for i, m in enumerate(models) if m.count >= thresholds.min_frames]
    if not usable:
        usable = [int(np.argmax([m.count for m in models]))]
    chosen = [models[i] for i in usable]
    if len(chosen) == 1:
        labels = [0]
    else:
        distances = kl2_matrix(chosen)
        found = AgglomerativeClustering(n_clusters=None, distance_threshold=thresholds.cluster, metric='precomputed',
                                        linkage='average').fit(distances)
        count = int(found.n_clusters_)
        wanted = min(max(count, limits.min_speakers), limits.max_speakers, len(chosen))
        if wanted != count:
            found = AgglomerativeClustering(n_clusters=wanted, metric='precomputed', linkage='average').fit(distances)
        labels = [int(label) for label in found.labels_]
    speakers = _pool(chosen, labels, max(labels) + 1)
    # Merge the pair of pooled models that the BIC most prefers as one, while it prefers one (or more than
    # maxSpeakers remain) and more than minSpeakers remain.
    while len(speakers) > max(1, limits.min_speakers):
        pairs = [(delta_bic(speakers[i], speakers[j], thresholds.merge), i, j)
                 for i in range(len(speakers)) for j in range(i + 1, len(speakers))]
        gain, a, b = min(pairs)
        if gain >= 0 and len(speakers) <= limits.max_speakers:
            break
        keep, drop = int(min(a, b)), int(max(a, b))
        speakers[keep] = speakers[keep] + speakers[drop]
        del speakers[drop]
    # A cluster with too little speech to be a speaker's (a few stray pieces) is dissolved.
    while len(speakers) > max(1, limits.min_speakers):
        smallest = min(range(len(speakers)), key=lambda i: (speakers[i].count, i))
        if speakers[smallest].count >= thresholds.min_speaker_frames:
            break
        del speakers[smallest]
    # One re-estimation pass: every piece to its nearest pooled model, then the models pooled again.
    labels = [nearest(models[i], speakers)[0] for i in usable]
    speakers = [s for s in _pool([models[i] for i in usable], labels, len(speakers))]
    assigned = [nearest(model, speakers)[0] for model in models]
    order: dict[int, int] = {}
    for label in assigned:
        order.setdefault(label, len(order))
    return [order[label] for label in assigned]


#: Pieces kept per speaker for online assignment (the most recent ones).
MAX_EXEMPLARS = 24

#: A speaker as an online session keeps it: the statistics of its latest usable pieces.
Exemplars = Tuple[Gaussian, ...]


def linkage(model: Gaussian, exemplars: Exemplars) -> float:
    """The average KL2 between a piece and a speaker's pieces: the distance of offline average linkage."""
    return float(np.mean([kl2(model, e) for e in exemplars]))


def assign_online(model: Gaussian, speakers: List[Exemplars], limits: Limits, thresholds: Thresholds) -> int:
    """The speaker of a finished piece: the one at the smallest average linkage when under the clustering
    threshold, else a new one (while fewer than maxSpeakers exist; while fewer than minSpeakers exist, at
    half the threshold). ``speakers`` is updated in place: a long enough piece joins its speaker's
    exemplars."""
    is_usable = model.count >= thresholds.min_frames
    if not speakers:
        speakers.append((model,))
        return 0
    distances = [linkage(model, exemplars) for exemplars in speakers]
    best = int(np.argmin(distances))
    threshold = thresholds.assign * (0.5 if len(speakers) < limits.min_speakers else 1.0)
    if is_usable and distances[best] >= threshold and len(speakers) < limits.max_speakers:
        speakers.append((model,))
        return len(speakers) - 1
    if is_usable:
        speakers[best] = (*speakers[best], model)[-MAX_EXEMPLARS:]
    return best


def guess_online(model: Gaussian, speakers: Sequence[Exemplars], limits: Limits, thresholds: Thresholds) -> int:
    """What :func:`assign_online` would answer for an unfinished piece, changing nothing."""
    return assign_online(model, list(speakers), limits, thresholds)


def settle_new_speakers(known: int, speakers: List[Exemplars], labels: List[int], models: Sequence[Gaussian],
                        limits: Limits, thresholds: Thresholds) -> List[int]:
    """The online form of dissolving small clusters: a speaker opened in this chunk (index ``known`` or
    more) whose pieces hold less than ``min_new_speaker_frames`` of speech is taken back, its pieces given to
    the nearest remaining speaker, as long as a speaker remains and at least ``minSpeakers`` do. Returns
    the labels of ``models`` with the speakers renumbered in order of appearance; ``speakers`` is updated
    in place."""
    def frames(index: int) -> float:
        return sum(m.count for m, label in zip(models, labels) if label == index)

    while True:
        small = [i for i in range(known, len(speakers)) if frames(i) < thresholds.min_new_speaker_frames]
        if not small or len(speakers) <= max(1, limits.min_speakers):
            break
        drop = min(small, key=lambda i: (frames(i), i))
        del speakers[drop]
        kept: List[int] = []
        for model, label in zip(models, labels):
            if label == drop:
                label = int(np.argmin([linkage(model, s) for s in speakers]))
            elif label > drop:
                label -= 1
            kept.append(label)
        labels = kept
    return labels
