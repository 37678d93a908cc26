"""Who speaks in each piece: offline clustering of a whole recording, and online assignment for
sessions.

Offline, the pieces long enough to carry speaker statistics are clustered bottom-up with average
linkage on their pairwise KL2 (scikit-learn's AgglomerativeClustering on the precomputed distances),
stopped at a distance threshold and held within [minSpeakers, maxSpeakers]. The clusters' pooled
models are then merged while the BIC prefers one model to two, clusters with too little speech to be a
speaker's are dissolved, and every piece, the short ones included, goes to the nearest pooled model.

Online, a chunk's finished pieces are clustered the same way together with the latest pieces kept of
every speaker, and each cluster is named after the speaker whose kept pieces it holds most of
(:func:`cluster_session`): a new speaker is one whose pieces cluster apart from everyone's, and a
speaker wrongly merged with another in an earlier chunk is split off again once heard enough. A
speaker heard only in pieces too short to cluster keeps the longest of them, so that the next chunk
still recognises the voice.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
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
    #: Frames a piece needs to take part in clustering or to update a speaker model.
    min_frames: int
    #: Frames a cluster needs to stand as a speaker of its own offline.
    min_speaker_frames: int
    #: Frames a cluster needs to stand as a speaker online (a session's window holds less of a new
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


#: Pieces kept per speaker for online clustering (the most recent ones).
MAX_EXEMPLARS = 24

#: A speaker as an online session keeps it: the statistics of its latest usable pieces (none once the
#: speaker has retired, its pieces found to be another's).
Exemplars = Tuple[Gaussian, ...]


def _speaker_of_clusters(found: Sequence[int], history: Sequence[Tuple[int, Gaussian]], known: int) -> dict[int, int]:
    """Cluster -> speaker id: each cluster holding kept pieces of known speakers takes the id of the one
    whose speech it holds most of, one cluster per id, the largest shares first."""
    clusters = max(found) + 1
    share = np.zeros((clusters, max(known, 1)))
    for (speaker, model), cluster in zip(history, found):
        share[cluster, speaker] += model.count
    mapping: dict[int, int] = {}
    taken: set[int] = set()
    for flat in np.argsort(-share, axis=None, kind='stable'):
        cluster, speaker = divmod(int(flat), share.shape[1])
        if share[cluster, speaker] > 0 and cluster not in mapping and speaker not in taken:
            mapping[cluster] = speaker
            taken.add(speaker)
    return mapping


def cluster_session(speakers: List[Exemplars], models: Sequence[Gaussian], limits: Limits,
                    thresholds: Thresholds) -> List[int]:
    """The speakers of a chunk's finished pieces (in time order). The pieces are clustered offline
    (:func:`cluster_offline`) together with every speaker's kept pieces, with ``min_new_speaker_frames``
    as the bar a cluster's speech must reach; a cluster takes the id of the speaker whose kept pieces it
    holds most of, and a cluster of new pieces alone opens a new speaker (while fewer than maxSpeakers
    ids exist, else it joins the nearest cluster). Every speaker's kept pieces are rebuilt from the
    clusters (its usable pieces, or its longest piece when none is usable), so a speaker who was taken
    for another in an earlier chunk is told apart once there is enough of them (``speakers`` is updated
    in place; ids are never reused)."""
    history = [(speaker, model) for speaker, exemplars in enumerate(speakers) for model in exemplars]
    pool = [model for _, model in history] + list(models)
    if not pool:
        return []
    # minSpeakers bounds the session, not each window: a window is never clustered into fewer speakers
    # than are known (up to minSpeakers), but it is not split to reach minSpeakers either (a chunk may
    # hold fewer voices than the session; forcing splits there invents speakers).
    live = sum(1 for exemplars in speakers if exemplars)
    window = replace(thresholds, min_speaker_frames=thresholds.min_new_speaker_frames)
    found = cluster_offline(pool, Limits(min(limits.min_speakers, max(live, 1)), limits.max_speakers), window)
    mapping = _speaker_of_clusters(found, history, len(speakers))
    rebuilt: List[List[Gaussian]] = [[] for _ in speakers]
    pooled = _pool(pool, found, max(found) + 1)
    for cluster in range(len(pooled)):
        if cluster in mapping:
            continue
        if len(rebuilt) < limits.max_speakers:
            mapping[cluster] = len(rebuilt)
            rebuilt.append([])
        elif mapping:  # no id left: the nearest cluster that has one
            named = sorted(mapping)
            mapping[cluster] = mapping[named[nearest(pooled[cluster], [pooled[c] for c in named])[0]]]
        else:
            # No id left and no cluster holds a kept piece: every speaker lacks one (a state written before
            # short pieces were kept, below). The newest speaker is the likeliest to be speaking again.
            mapping[cluster] = len(rebuilt) - 1
    for model, cluster in zip(pool, found):
        if model.count >= thresholds.min_frames:
            rebuilt[mapping[cluster]].append(model)
    # A speaker heard only in pieces too short to cluster (a "yes") keeps the longest of them: with no
    # kept piece the next chunk could not recognise the voice and would open another id for it.
    for speaker in sorted(set(mapping.values())):
        if not rebuilt[speaker]:
            mine = [model for model, cluster in zip(pool, found) if mapping[cluster] == speaker]
            rebuilt[speaker].append(max(mine, key=lambda model: model.count))
    speakers[:] = [tuple(models_of[-MAX_EXEMPLARS:]) for models_of in rebuilt]
    return [mapping[cluster] for cluster in found[len(history):]]


def guess_session(model: Gaussian, speakers: Sequence[Exemplars], limits: Limits, thresholds: Thresholds) -> int:
    """What :func:`cluster_session` would answer for an unfinished piece, changing nothing."""
    return cluster_session(list(speakers), [model], limits, thresholds)[0]
