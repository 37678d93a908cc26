"""Where a vits stream's first audio goes on the GPU: the time of each stage of one sentence (phonemes,
text encoder, duration predictor, flow, one decoder window by CUDA graph and eagerly) for one medium
random voice, by compute type. Each figure is the median of REPEATS runs after a warm-up, with the
device synchronized around each stage.

Usage (from the repository root, on a machine with CUDA): python3 bench/gpu/vits-stages.py [CACHE_DIR]
Prints one markdown table."""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'host'))

from voxmux_host.model_api import LoadContext  # noqa: E402
from voxmux_host.models.vits.adapter import VitsAdapter  # noqa: E402
from voxmux_host.models.vits.synthesizer import Scales  # noqa: E402

REPEATS = 20
TEXT = 'The quick brown fox jumps over the lazy dog, and keeps on running for quite a while longer.'


def timed(step: Callable[[], object]) -> float:
    samples: List[float] = []
    for _ in range(3):
        step()
    for _ in range(REPEATS):
        torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def stages(dtype: str, cache_dir: str) -> Dict[str, float]:
    adapter = VitsAdapter()
    adapter.load(LoadContext('i-0', 'vits-stages', {'config': 'medium', 'randomVoices': 1, 'voiceCacheDir': cache_dir,
                                                    'phonemizer': 'text', 'device': 'cuda', 'dtype': dtype}))
    adapter.warmup()
    adapter.load_resource('vits-0', 'voice', {})
    spec = adapter._spec('vits-0')
    resident = adapter._resident().use('vits-0')
    model = resident.model
    scales = Scales()
    ids = adapter._ids(TEXT, spec)
    mask = torch.ones(1, 1, ids.shape[1], device=ids.device)
    out: Dict[str, float] = {'phonemes': timed(lambda: adapter._ids(TEXT, spec))}
    with torch.no_grad(), adapter._autocast():
        x, m_p, logs_p = model.enc_p(ids, mask)
        out['text encoder'] = timed(lambda: model.enc_p(ids, mask))
        out['duration predictor'] = timed(lambda: model._log_durations(x, mask, scales.noise_w, torch.Generator().manual_seed(1)))
        z = model.encode(ids, scales, torch.Generator().manual_seed(1)).float()
        out['encode (all three + flow)'] = timed(lambda: model.encode(ids, scales, torch.Generator().manual_seed(1)))
        frames = int(adapter._options['chunkFrames']) + 2 * int(adapter._options['paddingFrames'])
        window = torch.zeros(1, z.shape[1], frames, device=z.device)
        window[:, :, :min(frames, z.shape[2])] = z[:, :, :frames]
        wmask = torch.ones(1, 1, frames, device=z.device)
        out['decoder window (graph)'] = timed(lambda: adapter._decode(resident, window, wmask))
        out['decoder window (eager)'] = timed(lambda: model.decode(window.to(adapter._dtype), wmask.to(adapter._dtype)))
        out['latent frames'] = float(z.shape[2])
        out['phoneme ids'] = float(ids.shape[1])
    adapter.close()
    return out


def main() -> None:
    cache_dir = sys.argv[1] if len(sys.argv) > 1 else str(Path.home() / '.cache' / 'voxmux' / 'vits')
    results = {dtype: stages(dtype, cache_dir) for dtype in ('fp32', 'bf16', 'fp16')}
    print(f'{torch.cuda.get_device_name()} torch {torch.__version__}; median of {REPEATS} runs, ms')
    print('| stage | ' + ' | '.join(results) + ' |')
    print('| --- |' + ' --- |' * len(results))
    for stage in next(iter(results.values())):
        print(f'| {stage} | ' + ' | '.join(f'{r[stage]:.2f}' for r in results.values()) + ' |')


if __name__ == '__main__':
    main()
