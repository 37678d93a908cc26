"""``VitsAdapter``: VITS speech synthesis (Piper "medium" shapes) behind the host's stream contract, with
voices as resources held resident on the device (``model_api.StreamAdapter`` and ``ResourceAdapter``).

Options (``LoadContext.options``; unknown keys fail the load; docs/adapters.md has the full story):

| option | default | meaning |
| --- | --- | --- |
| ``config`` | ``"medium"`` | ``"medium"`` (Piper medium, 22,050 Hz) or ``"tiny"`` (tests) |
| ``voicesDir`` | none | a folder of voice files ``<name>.pt`` / ``<name>.ckpt`` (+ Piper ``.json`` configs) |
| ``randomVoices`` | 0 | seeded random voices ``vits-0`` … ``vits-<N-1>`` (written once to ``voiceCacheDir``) |
| ``seed`` | 0 | base seed of the random voices |
| ``voiceCacheDir`` | ``~/.cache/voxmux/vits`` | where random voice files are written |
| ``phonemizer`` | ``"espeak"`` | ``"espeak"`` (libespeak-ng through ctypes) or ``"text"`` (characters as symbols) |
| ``espeakDataPath`` | none | espeak-ng's data folder (passed to ``espeak_Initialize``) |
| ``device`` | ``"auto"`` | ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` |
| ``dtype`` | ``"fp32"`` | compute type on CUDA: ``fp16``/``bf16`` run under autocast (the duration predictor stays fp32); the CPU runs fp32 only |
| ``cudaGraphs`` | true | capture the decoder window as CUDA graphs at warmup (CUDA only) |
| ``graphBatchSizes`` | [1, 2, 4, 8] | window batch sizes captured |
| ``maxBatchWindows`` | 8 | decoder windows of one voice decoded in one forward at most |
| ``chunkFrames`` / ``paddingFrames`` | 45 / 10 | the decoder window (Piper's streaming values) |
| ``residentBudgetBytes`` | 2 GiB | device bytes for voice weights (fp32: 63.1 MB a medium voice) |
| ``hostBudgetBytes`` | 8 GiB | host bytes for host copies of voices seen; 0: none |
| ``preloadVoices`` | [] | voices made resident while the model loads |
| ``noiseSeed`` | 0 | seed of the sampling noise (with the voice and the sentence's text) |
| ``probeTimeoutMs`` | 1500 | how long ``probe`` waits for its kernel |

StartStream params: ``sentences`` (non-empty strings), ``voice`` (a catalogue name; the stream's resource
when given), ``speed`` (0.25-4: length_scale = the voice's length_scale / speed), optional ``seed`` (int,
replaces noiseSeed). Chunks: mono s16le at the voice's rate, ``meta`` {sampleRate, sentence}, one per
decoder window (<= 0.75 s). Usage: {characters, sentences, audioSeconds}.
"""
from __future__ import annotations

import os
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, Generator, Iterator, List, Optional, Tuple, Union

import numpy as np
import torch

from voxmux_host.boot_stages import StageTimer
from voxmux_host.errors import InstanceError
from voxmux_host.load_options import is_int, resolve_device, with_defaults
from voxmux_host.model_api import (AdapterStats, LoadContext, LoadInfo, ResourceInfo, ResourceLoad, StreamPiece,
                                   StreamRequest, WarmupInfo)

from .checkpoint import Layout, bind, layout_of, load_voice_file, skeleton
from .config import PRESETS, VitsConfig
from .graphs import DecoderGraphs
from .phonemes import EspeakPhonemizer, TextPhonemizer, to_ids
from .residency import ResidencyOptions, VoiceResidency
from .synthesizer import Scales, SynthesizerTrn
from .voices import VoiceSpec, ensure_random_voices, scan_voices_dir
from .windows import Window, plan_windows

GIB = 1024 ** 3
DEFAULT_OPTIONS: Dict[str, Any] = {
    'config': 'medium',
    'voicesDir': None,
    'randomVoices': 0,
    'seed': 0,
    'voiceCacheDir': '~/.cache/voxmux/vits',
    'phonemizer': 'espeak',
    'espeakDataPath': None,
    'device': 'auto',
    'dtype': None,
    'cudaGraphs': True,
    'graphBatchSizes': [1, 2, 4, 8],
    'maxBatchWindows': 8,
    'chunkFrames': 45,
    'paddingFrames': 10,
    'residentBudgetBytes': 2 * GIB,
    'hostBudgetBytes': 8 * GIB,
    'preloadVoices': [],
    'noiseSeed': 0,
    'probeTimeoutMs': 1500,
}
STREAM_PARAMS = ('sentences', 'voice', 'speed', 'seed')
SPEED_RANGE = (0.25, 4.0)
DTYPES = {'fp32': torch.float32, 'fp16': torch.float16, 'bf16': torch.bfloat16}
PCM_MAX = 32767
#: What a stream's generator yields to ``open_stream`` once it holds its voice; the host never sees it.
_OPENED = StreamPiece({}, b'')


@dataclass
class ResidentVoice:
    """A voice on the device: its flat fp32 weights and the model whose parameters are views into them."""

    flat: torch.Tensor
    model: SynthesizerTrn


@dataclass
class _Cursor:
    """One open stream's place in its current sentence, and a decoded window not yet sent."""

    request: StreamRequest
    voice: str
    resident: ResidentVoice
    sentence: int = -1
    z: Optional[torch.Tensor] = None
    windows: List[Window] = field(default_factory=list)
    next: int = 0
    ready: Optional[bytes] = None

    def has_window(self) -> bool:
        return self.ready is not None or self.next < len(self.windows)

    def needs_decode(self) -> bool:
        return self.ready is None and self.next < len(self.windows) and not self.request.cancelled.is_set()


class VitsAdapter:
    work_kinds: ClassVar[Tuple[str, ...]] = ('stream',)

    def __init__(self) -> None:
        self._options: Dict[str, Any] = dict(DEFAULT_OPTIONS)
        self._config: VitsConfig = PRESETS['medium']
        self._device = torch.device('cpu')
        self._dtype = torch.float32
        self._template: Optional[SynthesizerTrn] = None
        self._layout: Optional[Layout] = None
        self._voices: Dict[str, VoiceSpec] = {}
        self._residency: Optional[VoiceResidency[ResidentVoice]] = None
        self._phonemizers: Dict[str, Union[EspeakPhonemizer, TextPhonemizer]] = {}
        self._graphs: Optional[DecoderGraphs] = None
        self._cursors: Dict[str, List[_Cursor]] = {}
        self._eager_batches = 0
        self._probe_lock = threading.Lock()
        self._probe_stream: Optional[Any] = None
        #: Set while load() runs: preloaded voices' disk reads and uploads are timed as boot stages.
        self._boot_timer: Optional[StageTimer] = None

    # -- lifecycle --------------------------------------------------------------------------------

    def load(self, ctx: LoadContext) -> LoadInfo:
        options = parse_options(ctx.options)
        self._options = options
        self._config = PRESETS[options['config']]
        self._device = resolve_device(str(options['device']))
        if self._device.type == 'cuda':
            torch.cuda.set_device(self._device)
        dtype_name = options['dtype'] or 'fp32'
        if self._device.type == 'cpu' and dtype_name != 'fp32':
            raise InstanceError('load_failed', f'dtype {dtype_name} needs a CUDA device: the CPU runs fp32')
        self._dtype = DTYPES[dtype_name]
        timer = StageTimer()
        with timer.stage('model_build'):
            self._template = skeleton(self._config)
            self._layout = layout_of(self._template)
            self._voices = self._catalogue(options)
            self._phonemizers = self._make_phonemizers(options)
        layout = self._layout
        self._residency = VoiceResidency(
            ResidencyOptions(options['residentBudgetBytes'], options['hostBudgetBytes']),
            voice_bytes=lambda name: layout.bytes_fp32,
            read_disk=self._read_voice,
            to_host=self._to_host,
            to_device=self._to_device)
        self._boot_timer = timer
        try:
            for name in options['preloadVoices']:
                if name not in self._voices:
                    raise InstanceError('load_failed', f"preloadVoices names '{name}': not in the catalogue "
                                                       f'({len(self._voices)} voices)')
                self._residency.load(name, for_request=False)
        finally:
            self._boot_timer = None
        return LoadInfo(device=str(self._device), parameters=layout.numel, memory_bytes=self._resident_bytes(),
                        stages=timer.take())

    def warmup(self) -> WarmupInfo:
        """Run encode and a full decoder window once on zero weights (kernel selection, allocator), then
        capture the decoder graphs (CUDA with cudaGraphs)."""
        assert self._template is not None and self._layout is not None
        timer = StageTimer()
        frames = self._options['chunkFrames'] + 2 * self._options['paddingFrames']
        with timer.stage('warmup'):
            flat = torch.zeros(self._layout.numel, dtype=torch.float32, device=self._device)
            dummy = ResidentVoice(flat, self._bind(flat))
            ids = torch.tensor([[1, 0, 20, 0, 30, 0, 2]], dtype=torch.long, device=self._device)
            with torch.no_grad(), self._autocast():
                dummy.model.encode(ids, Scales(), torch.Generator().manual_seed(0))
                z = torch.zeros(1, self._config.inter_channels, frames, device=self._device)
                dummy.model.decode(z, torch.ones(1, 1, frames, device=self._device))
        captured = 0
        if self._device.type == 'cuda' and self._options['cudaGraphs']:
            with self._probe_lock, timer.stage('graph_capture'):  # no probe kernel while capturing
                self._graphs = DecoderGraphs(self._template, self._layout, self._config, device=self._device,
                                             dtype=self._dtype, frames=frames,
                                             batch_sizes=self._options['graphBatchSizes'])
                captured = self._graphs.capture()
        return WarmupInfo(graphs_captured=captured, stages=timer.take())

    def stats(self) -> AdapterStats:
        return AdapterStats(memory_bytes=self._resident_bytes(), eager_batches=self._eager_batches,
                            graph_replays=self._graphs.replays if self._graphs is not None else 0)

    def probe(self) -> bool:
        """A one-element kernel on a side stream, waited for up to probeTimeoutMs (CUDA); True on the CPU."""
        if self._device.type != 'cuda':
            return True
        if not self._probe_lock.acquire(timeout=0.01):
            return True  # graphs are being captured: launch nothing
        try:
            if self._probe_stream is None:
                self._probe_stream = torch.cuda.Stream(self._device)  # type: ignore[no-untyped-call]
            stream = self._probe_stream
            with torch.cuda.stream(stream):  # type: ignore[arg-type]
                torch.ones(1, device=self._device).add_(1)
                event = torch.cuda.Event()  # type: ignore[no-untyped-call]
                event.record(stream)  # type: ignore[no-untyped-call]
        except Exception:  # noqa: BLE001 - any failure is an unhealthy device
            return False
        finally:
            self._probe_lock.release()
        deadline = time.monotonic() + int(self._options['probeTimeoutMs']) / 1000
        while time.monotonic() < deadline:
            if event.query():  # type: ignore[no-untyped-call]
                return True
            time.sleep(0.001)
        return False

    def close(self) -> None:
        self._graphs = None
        self._residency = None
        self._cursors.clear()

    # -- catalogue and resources ------------------------------------------------------------------

    def catalog(self) -> List[Dict[str, Any]]:
        return [spec.catalog_entry() for spec in self._voices.values()]

    def load_resource(self, name: str, kind: str, source: Dict[str, Any]) -> ResourceLoad:
        if kind != 'voice':
            raise InstanceError('unsupported_option', f"Expected resource kind 'voice': got {kind!r}")
        if source:
            raise InstanceError('unsupported_option', f'Expected an empty resource source (voices come from the '
                                                      f'catalogue): got keys {sorted(source)}')
        self._spec(name)
        origin, nbytes, ms = self._resident().load(name)
        return ResourceLoad('device', nbytes, origin, ms)

    def evict_resource(self, name: str) -> int:
        return self._resident().evict(name)

    def resources(self) -> List[ResourceInfo]:
        residency = self._residency
        if residency is None:
            return []
        return [ResourceInfo(name, 'voice', where, nbytes) for name, where, nbytes in residency.listing()]

    def resource_counters(self) -> Dict[str, float]:
        residency = self._residency
        return residency.counters() if residency is not None else {}

    # -- streams ----------------------------------------------------------------------------------

    def open_stream(self, request: StreamRequest) -> Iterator[StreamPiece]:
        """The stream holds its voice on the device from here (not from its first piece) until it ends, is
        closed or fails: the host may open other streams, and load their voices, before it steps this one.
        A voice that cannot be made resident beside the voices held fails the open (``out_of_memory``)."""
        sentences, voice, speed, seed = parse_params(request.params, request.resource)
        spec = self._spec(voice)
        scales = Scales(spec.scales.noise_scale, spec.scales.length_scale / speed, spec.scales.noise_w)
        pieces = self._stream(request, spec, sentences, scales,
                              seed if seed >= 0 else int(self._options['noiseSeed']))
        # Run the generator to its first yield: it takes the voice now, and a close() before the host's
        # first step (a cancel) runs its finally, which gives the voice back (an unstarted generator's
        # close() runs nothing).
        opened = next(pieces)
        assert opened is _OPENED
        return pieces

    def _stream(self, request: StreamRequest, spec: VoiceSpec, sentences: List[str], scales: Scales,
                seed: int) -> Generator[StreamPiece, None, Dict[str, Any]]:
        residency = self._resident()
        resident = residency.use(spec.name)
        cursor = _Cursor(request, spec.name, resident)
        self._cursors.setdefault(spec.name, []).append(cursor)
        samples = 0
        try:
            yield _OPENED  # to open_stream, never to the host
            for index, text in enumerate(sentences):
                if request.cancelled.is_set():
                    break
                ids = self._ids(text, spec)
                generator = torch.Generator().manual_seed(_noise_seed(seed, spec.name, text))
                with torch.no_grad(), self._autocast():
                    z = resident.model.encode(ids, scales, generator).float()
                cursor.sentence = index
                cursor.z = z
                cursor.windows = plan_windows(z.shape[2], self._options['chunkFrames'],
                                              self._options['paddingFrames'])
                cursor.next = 0
                while cursor.has_window():
                    if cursor.ready is None:
                        self._decode_round(cursor)
                    data = cursor.ready
                    cursor.ready = None
                    assert data is not None
                    samples += len(data) // 2
                    yield StreamPiece({'sampleRate': spec.sample_rate, 'sentence': index}, data)
                    if request.cancelled.is_set():
                        break
                if request.cancelled.is_set():
                    break
        finally:
            peers = self._cursors.get(spec.name, [])
            if cursor in peers:
                peers.remove(cursor)
            if not peers:
                self._cursors.pop(spec.name, None)
            residency.release(spec.name)
        return {'characters': sum(len(s) for s in sentences), 'sentences': len(sentences),
                'audioSeconds': round(samples / spec.sample_rate, 3)}

    def _decode_round(self, cursor: _Cursor) -> None:
        """Decode ``cursor``'s next window together with the next windows of other open streams of the same
        voice that wait for one (up to maxBatchWindows): their audio is ready when their generators step."""
        batch = [cursor]
        for peer in self._cursors.get(cursor.voice, []):
            if len(batch) >= int(self._options['maxBatchWindows']):
                break
            if peer is not cursor and peer.needs_decode():
                batch.append(peer)
        frames = max(c.windows[c.next].frames for c in batch)
        if len(batch) > 1 or self._graphs is not None:
            frames = self._options['chunkFrames'] + 2 * self._options['paddingFrames']
        z = torch.zeros(len(batch), self._config.inter_channels, frames, device=self._device)
        mask = torch.zeros(len(batch), 1, frames, device=self._device)
        for row, c in enumerate(batch):
            window = c.windows[c.next]
            assert c.z is not None
            z[row, :, :window.frames] = c.z[0, :, window.start:window.end]
            mask[row, :, :window.frames] = 1.0
        audio = self._decode(cursor.resident, z, mask)
        hop = self._config.hop_samples
        pcm = (audio.clamp(-1.0, 1.0) * PCM_MAX).round().to(torch.int16).cpu().numpy()
        for row, c in enumerate(batch):
            window = c.windows[c.next]
            c.ready = np.ascontiguousarray(pcm[row, window.keep_start * hop:window.keep_end * hop]).astype('<i2').tobytes()
            c.next += 1

    def _decode(self, resident: ResidentVoice, z: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        graphs = self._graphs
        with torch.no_grad():
            if graphs is not None and z.shape[0] <= graphs.max_batch:
                return graphs.decode(resident.flat, z, mask)
            self._eager_batches += 1
            if self._device.type == 'cuda':
                z, mask = z.to(self._dtype), mask.to(self._dtype)
            with self._autocast():
                return resident.model.decode(z, mask).float()

    def _ids(self, text: str, spec: VoiceSpec) -> torch.Tensor:
        phonemizer = self._phonemizers[spec.phoneme_type]
        phonemes = phonemizer.phonemize(text, spec.espeak_voice)
        ids = to_ids(phonemes, spec.phoneme_id_map)
        return torch.tensor([ids], dtype=torch.long, device=self._device)

    # -- helpers ----------------------------------------------------------------------------------

    def _catalogue(self, options: Dict[str, Any]) -> Dict[str, VoiceSpec]:
        specs: List[VoiceSpec] = []
        if options['voicesDir']:
            specs.extend(scan_voices_dir(str(options['voicesDir']), self._config))
        if options['randomVoices']:
            cache = os.path.expanduser(str(options['voiceCacheDir']))
            specs.extend(ensure_random_voices(cache, self._config, int(options['randomVoices']), int(options['seed']),
                                              self._device))
        if not specs:
            raise InstanceError('load_failed', 'Expected voices: set voicesDir or randomVoices')
        voices: Dict[str, VoiceSpec] = {}
        for spec in specs:
            top = max((i for ids in spec.phoneme_id_map.values() for i in ids), default=0)
            if top >= self._config.n_vocab or any(s not in spec.phoneme_id_map for s in ('_', '^', '$')):
                raise InstanceError('load_failed', f"Voice '{spec.name}' needs a phoneme_id_map with '_', '^' and '$' "
                                                   f'and ids below {self._config.n_vocab}')
            if spec.name in voices:
                raise InstanceError('load_failed', f"Two voices are named '{spec.name}': {voices[spec.name].path} "
                                                   f'and {spec.path}')
            voices[spec.name] = spec
        return voices

    def _make_phonemizers(self, options: Dict[str, Any]) -> Dict[str, Union[EspeakPhonemizer, TextPhonemizer]]:
        phonemizers: Dict[str, Union[EspeakPhonemizer, TextPhonemizer]] = {'text': TextPhonemizer()}
        wants_espeak = options['phonemizer'] == 'espeak' and any(
            spec.phoneme_type == 'espeak' for spec in self._voices.values())
        if wants_espeak:
            phonemizers['espeak'] = EspeakPhonemizer(options['espeakDataPath'])
        else:
            phonemizers['espeak'] = phonemizers['text']  # phonemizer "text": every voice reads characters
        return phonemizers

    def _spec(self, name: str) -> VoiceSpec:
        spec = self._voices.get(name)
        if spec is None:
            raise InstanceError('resource_not_found', f"Expected a voice of this model: '{name}' is not one of its "
                                                      f'{len(self._voices)} voices')
        return spec

    def _resident(self) -> VoiceResidency[ResidentVoice]:
        if self._residency is None:
            raise InstanceError('load_failed', 'The model is not loaded')
        return self._residency

    def _resident_bytes(self) -> int:
        residency = self._residency
        return int(residency.counters()['residentBytes']) if residency is not None else 0

    def _bind(self, flat: torch.Tensor) -> SynthesizerTrn:
        assert self._template is not None and self._layout is not None
        model = bind(self._template, flat, self._layout)
        assert isinstance(model, SynthesizerTrn)
        return model

    def _read_voice(self, name: str) -> torch.Tensor:
        assert self._layout is not None
        timer = self._boot_timer
        if timer is None:
            return load_voice_file(self._voices[name].path, self._layout)
        with timer.stage('weight_read') as part:
            flat = load_voice_file(self._voices[name].path, self._layout)
            part.bytes = os.path.getsize(self._voices[name].path)
        return flat

    def _to_host(self, flat: torch.Tensor) -> torch.Tensor:
        return flat.pin_memory() if self._device.type == 'cuda' else flat

    def _to_device(self, flat: torch.Tensor) -> ResidentVoice:
        if self._device.type != 'cuda':
            return ResidentVoice(flat, self._bind(flat))  # the CPU model reads the host tensor itself
        started = time.perf_counter()
        on_device = flat.to(self._device, non_blocking=True)
        # Wait for the copy, so that the load time counted is the copy's.
        torch.cuda.current_stream(self._device).synchronize()  # type: ignore[no-untyped-call]
        if self._boot_timer is not None:
            self._boot_timer.record('device_upload', (time.perf_counter() - started) * 1000,
                                    flat.numel() * flat.element_size())
        return ResidentVoice(on_device, self._bind(on_device))

    def _autocast(self) -> Any:
        if self._device.type == 'cuda' and self._dtype != torch.float32:
            return torch.autocast('cuda', dtype=self._dtype)
        return _NoAutocast()


class _NoAutocast:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _noise_seed(seed: int, voice: str, text: str) -> int:
    return (seed * 0x9E3779B1 + zlib.crc32(f'{voice}\0{text}'.encode('utf-8'))) % (2 ** 63)


def parse_options(given: Dict[str, Any]) -> Dict[str, Any]:
    options = with_defaults(given, DEFAULT_OPTIONS, 'vits')
    problems: List[str] = []
    if options['config'] not in PRESETS:
        problems.append(f"config must be one of {sorted(PRESETS)}: got {options['config']!r}")
    if options['phonemizer'] not in ('espeak', 'text'):
        problems.append(f"phonemizer must be espeak or text: got {options['phonemizer']!r}")
    if options['dtype'] is not None and options['dtype'] not in DTYPES:
        problems.append(f"dtype must be one of {sorted(DTYPES)}: got {options['dtype']!r}")
    for key in ('randomVoices', 'seed', 'noiseSeed'):
        if not is_int(options[key]) or options[key] < 0:
            problems.append(f'{key} must be an integer >= 0: got {options[key]!r}')
    for key in ('maxBatchWindows', 'chunkFrames', 'probeTimeoutMs'):
        if not is_int(options[key]) or options[key] < 1:
            problems.append(f'{key} must be an integer >= 1: got {options[key]!r}')
    if not is_int(options['paddingFrames']) or options['paddingFrames'] < 0:
        problems.append(f"paddingFrames must be an integer >= 0: got {options['paddingFrames']!r}")
    for key in ('residentBudgetBytes', 'hostBudgetBytes'):
        value = options[key]
        if value is not None and (not is_int(value) or value < 0):
            problems.append(f'{key} must be null or an integer >= 0: got {value!r}')
    sizes = options['graphBatchSizes']
    if not isinstance(sizes, list) or not sizes or not all(is_int(s) and s >= 1 for s in sizes):
        problems.append(f'graphBatchSizes must be a non-empty list of integers >= 1: got {sizes!r}')
    preload = options['preloadVoices']
    if not isinstance(preload, list) or not all(isinstance(n, str) for n in preload):
        problems.append(f'preloadVoices must be a list of voice names: got {preload!r}')
    if not isinstance(options['cudaGraphs'], bool):
        problems.append(f"cudaGraphs must be true or false: got {options['cudaGraphs']!r}")
    for key in ('voicesDir', 'espeakDataPath', 'voiceCacheDir'):
        if options[key] is not None and not isinstance(options[key], str):
            problems.append(f'{key} must be a path: got {options[key]!r}')
    if problems:
        raise InstanceError('load_failed', 'Invalid vits options: ' + '; '.join(problems))
    return options


def parse_params(params: Dict[str, Any], resource: Optional[str]) -> Tuple[List[str], str, float, int]:
    unknown = sorted(set(params) - set(STREAM_PARAMS))
    if unknown:
        raise InstanceError('unsupported_option', f'Unknown stream params {unknown}: expected {list(STREAM_PARAMS)}')
    sentences = params.get('sentences')
    if (not isinstance(sentences, list) or not sentences
            or not all(isinstance(s, str) and s.strip() for s in sentences)):
        raise InstanceError('unsupported_option', 'Expected sentences: a non-empty list of non-empty strings')
    voice = params.get('voice', resource)
    if not isinstance(voice, str) or not voice:
        raise InstanceError('unsupported_option', f'Expected voice: a voice name, got {voice!r}')
    if resource is not None and resource != voice:
        raise InstanceError('unsupported_option', f"The stream's resource '{resource}' is not its voice '{voice}'")
    speed = params.get('speed', 1.0)
    if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not SPEED_RANGE[0] <= speed <= SPEED_RANGE[1]:
        raise InstanceError('unsupported_option', f'Expected speed between 0.25 and 4: got {speed!r}')
    seed = params.get('seed', None)
    if seed is not None and (not is_int(seed) or seed < 0):
        raise InstanceError('unsupported_option', f'Expected seed: an integer >= 0, got {seed!r}')
    return list(sentences), voice, float(speed), int(seed) if seed is not None else -1
