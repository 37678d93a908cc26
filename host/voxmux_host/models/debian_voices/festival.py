"""Festival voices through one long-lived ``festival --pipe`` process per instance.

Festival takes 1-2 s to start (its lexicons), and 20-250 ms per sentence once started, so the process
lives as long as the instance: it is spawned by ``warmup`` without waiting for it (it loads while the
instance serves other voices) and again at the next sentence after it dies. The voice is switched per
sentence, only when it changes.

The protocol on its stdin and stdout (verified with festival 2.5.0): each sentence is one Scheme form

    (unwind-protect (begin <voice> <speed> (voxmux_save_wave "..." "<file>") (format t "OK <n>\\n"))
                    (format t "ER <n>\\n"))
    (fflush nil)

and Festival answers one line, ``OK <n>`` once the file is written or ``ER <n>`` when a Scheme error
interrupted it (the error itself goes to its stderr, kept in a file). ``fflush`` is needed: Festival's
stdout is a pipe, which it buffers. Lines without the expected tag are skipped. A form that fails
leaves the process running: the sentence fails with ``model_failed``, the instance goes on. A process
that exits or does not answer within ``sentence_timeout_s`` is killed; that sentence fails, and the
next one starts a fresh process. A cancel ends the wait for an answer within ``CANCEL_POLL_S``, not
festival's sentence: festival finishes it, and the next sentence queues behind it (its answer, when it
comes, is skipped as a line with another tag).

``voxmux_save_wave`` (``SAVE_WAVE``, defined by the start-up form) is ``utt.synth`` and ``utt.save.wave``
except for a sentence whose analysis finds nothing to say ("...", an emoji): Festival's diphone voices
crash (SIGSEGV) on an utterance without segments, so it synthesizes no wave and writes no file, and the
sentence has no audio, as with flite.
"""
from __future__ import annotations

import os
import select
import shutil
import subprocess
import tempfile
import threading
import time
import wave
from typing import IO, Dict, List, Optional, Sequence, Tuple

from ...errors import InstanceError
from .catalogue import Voice
from .engine import Audio

PROGRAM = 'festival'
DATA_DIR = '/usr/share/festival'
#: What each voice needs besides the festival package: (directory, Debian package).
VOICE_FILES: Dict[str, Tuple[str, str]] = {
    'voice_cmu_us_slt_arctic_hts': (f'{DATA_DIR}/voices/us/cmu_us_slt_arctic_hts', 'festvox-us-slt-hts'),
    'voice_kal_diphone': (f'{DATA_DIR}/voices/english/kal_diphone', 'festvox-kallpc16k'),
    'voice_ked_diphone': (f'{DATA_DIR}/voices/english/ked_diphone', 'festvox-kdlpc16k'),
}
LEXICON_FILES: Tuple[Tuple[str, str], ...] = ((f'{DATA_DIR}/dicts/cmu', 'festlex-cmu'),)
#: HTS voices ignore Duration_Stretch: their speed is the HTS engine's ``-r`` (speech speed rate), added to
#: the voice's own engine parameters.
HTS_PARAMS: Dict[str, str] = {'voice_cmu_us_slt_arctic_hts': 'cmu_us_slt_arctic_hts::hts_engine_params'}

#: Festival's own ``utt.synth`` for a Text utterance (synthesis.scm: before_synth_hooks, the modules of
#: ``(defUttType Text ...)``, after_synth_hooks) and ``utt.save.wave``, with its last module, Wave_Synth, run
#: only when the others found segments. Without segments, FILE is deleted instead: a cancelled sentence may
#: have left it, and its audio is not this sentence's.
SAVE_WAVE = ("(define (voxmux_save_wave text file)"
             " (let ((utt (apply_hooks before_synth_hooks (eval (list 'Utterance 'Text text)))))"
             "  (mapcar (lambda (step) (if (not (eq? (car step) 'Wave_Synth)) (set! utt ((eval (car step)) utt))))"
             "          (cdr (assoc 'Text UttTypes)))"
             "  (if (utt.relation.items utt 'Segment)"
             "      (utt.save.wave (apply_hooks after_synth_hooks (Wave_Synth utt)) file 'riff)"
             "      (if (probe_file file) (delete-file file)))))")
READY_TIMEOUT_S = 60.0
SENTENCE_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 2.0
CANCEL_POLL_S = 0.02  # how often a wait for festival looks at the stream's cancel
STDERR_TAIL_BYTES = 400


def scheme_string(text: str) -> str:
    """``text`` as a Scheme string literal: backslashes and quotes escaped, control characters as spaces."""
    printable = ''.join(ch if ch.isprintable() else ' ' for ch in text)
    return '"' + printable.replace('\\', '\\\\').replace('"', '\\"') + '"'


def speed_form(engine_voice: str, speed: float) -> str:
    hts_params = HTS_PARAMS.get(engine_voice)
    if hts_params is not None:
        return f'(set! hts_engine_params (append {hts_params} (list (list "-r" {speed!r}))))'
    return f"(Parameter.set 'Duration_Stretch {1.0 / speed!r})"


class _Process:
    """One running festival: its pipes, the tags it has answered, and what it wrote to stderr."""

    def __init__(self, program: str, work_dir: str) -> None:
        self.stderr_path = os.path.join(work_dir, f'festival-{time.monotonic_ns()}.stderr')
        with open(self.stderr_path, 'wb') as stderr:
            # stdin closing (this process exiting, however it exits) ends festival --pipe: no orphan stays.
            self.popen = subprocess.Popen([program, '--pipe'], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=stderr, cwd=work_dir)
        self.ready = False
        self._buffer = b''

    @property
    def stdin(self) -> IO[bytes]:
        assert self.popen.stdin is not None
        return self.popen.stdin

    def send(self, form: str, tag: int) -> None:
        line = (f'(unwind-protect (begin {form} (format t "OK {tag}\\n")) (format t "ER {tag}\\n")) '
                f'(fflush nil)\n')
        self.stdin.write(line.encode('utf-8'))
        self.stdin.flush()

    def answer(self, tag: int, timeout_s: float, cancelled: threading.Event) -> str:
        """'ok' for ``OK <tag>``, 'error' for ``ER <tag>``, 'cancelled' as soon as ``cancelled`` is set, and
        'gone' when festival closed its stdout or the time ran out. After 'cancelled' the answer is still
        due: a later call skips it with the other lines that do not carry its own tag."""
        assert self.popen.stdout is not None
        fd = self.popen.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        expected = {f'OK {tag}'.encode(): 'ok', f'ER {tag}'.encode(): 'error'}
        while True:
            while b'\n' in self._buffer:
                line, self._buffer = self._buffer.split(b'\n', 1)
                if line.strip() in expected:
                    return expected[line.strip()]
            if cancelled.is_set():
                return 'cancelled'
            left = deadline - time.monotonic()
            if left <= 0:
                return 'gone'
            readable, _, _ = select.select([fd], [], [], min(left, CANCEL_POLL_S))
            if readable:
                data = os.read(fd, 65536)
                if not data:
                    return 'gone'
                self._buffer += data

    def stderr_tail(self, since: int) -> str:
        try:
            with open(self.stderr_path, 'rb') as stderr:
                stderr.seek(since)
                text = stderr.read().decode('utf-8', 'replace').strip()
        except OSError:
            return ''
        return text[-STDERR_TAIL_BYTES:]

    def stderr_size(self) -> int:
        try:
            return os.path.getsize(self.stderr_path)
        except OSError:
            return 0

    def stop(self) -> None:
        try:
            self.stdin.close()
        except OSError:
            pass
        try:
            self.popen.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        if self.popen.stdout is not None:
            self.popen.stdout.close()
        try:
            os.unlink(self.stderr_path)
        except OSError:
            pass


class FestivalEngine:
    def __init__(self, program: str = PROGRAM, ready_timeout_s: float = READY_TIMEOUT_S,
                 sentence_timeout_s: float = SENTENCE_TIMEOUT_S) -> None:
        self._program = program
        self._ready_timeout_s = ready_timeout_s
        self._sentence_timeout_s = sentence_timeout_s
        self._work_dir: Optional[str] = None
        self._process: Optional[_Process] = None
        self._voice: Optional[str] = None  # the voice the running process has selected
        self._tag = 0
        self._ready_tag = 0  # the tag of the start-up form that the running process answers when ready
        self._starts = 0
        self._last_error = ''

    @property
    def pid(self) -> Optional[int]:
        """The running festival's process id; None before the first start or after it died."""
        process = self._process
        return process.popen.pid if process is not None and process.popen.poll() is None else None

    @property
    def starts(self) -> int:
        """How many festival processes this engine started (one, plus one per restart)."""
        return self._starts

    def load(self, voices: Sequence[Voice]) -> None:
        missing: List[str] = []
        program = shutil.which(self._program)
        if program is None:
            missing.append(f'the program {self._program!r} (Debian package festival)')
        needed = list(LEXICON_FILES) + [VOICE_FILES[v.engine_voice] for v in voices if v.engine_voice in VOICE_FILES]
        missing += [f'{path} (Debian package {package})' for path, package in needed if not os.path.isdir(path)]
        unknown = [v.name for v in voices if v.engine_voice not in VOICE_FILES]
        if unknown:
            missing.append(f'a festival voice for {", ".join(unknown)}')
        if missing:
            raise InstanceError('load_failed', f'The festival voices need {"; ".join(missing)}: not found')
        self._program = program or self._program
        self._work_dir = tempfile.mkdtemp(prefix='voxmux-festival-')

    def warmup(self) -> None:
        self._start()  # not waited for: festival loads while the instance serves its other voices

    def synthesize(self, voice: Voice, text: str, speed: float, cancelled: threading.Event) -> Optional[Audio]:
        # A cancel stops the wait, not festival: the sentence runs to its end in festival while the stream
        # ends, and the next sentence queues behind it.
        process = self._running(cancelled)
        if process is None:
            return None
        assert self._work_dir is not None
        path = os.path.join(self._work_dir, 'sentence.wav')
        select_voice = f'({voice.engine_voice})'
        forms = []
        if self._voice != voice.engine_voice:
            forms.append(select_voice)
        forms.append(speed_form(voice.engine_voice, speed))
        forms.append(f'(voxmux_save_wave {scheme_string(text)} {scheme_string(path)})')
        self._voice = None  # unknown until festival answers OK
        answer = self._call(process, ' '.join(forms), self._sentence_timeout_s, cancelled)
        if answer == 'exited':
            # The process died before or while it took the sentence (killed, say): once, the sentence goes to
            # a fresh one. A sentence that kills festival itself fails on the second.
            process = self._running(cancelled)
            if process is None:
                return None
            if forms[0] != select_voice:
                forms.insert(0, select_voice)
            answer = self._call(process, ' '.join(forms), self._sentence_timeout_s, cancelled)
        if answer == 'cancelled':
            return None
        if answer != 'ok':
            raise InstanceError('model_failed', f'festival could not synthesize a sentence with {voice.name}: '
                                                f'{self._last_error}')
        self._voice = voice.engine_voice
        if not os.path.exists(path):  # nothing to say: see SAVE_WAVE
            return Audio(voice.sample_rate, b'')
        try:
            return _read_wave(path)
        finally:
            try:
                os.unlink(path)
            except OSError:
                pass

    def _start(self) -> _Process:
        if self._work_dir is None:
            raise InstanceError('model_failed', 'Expected the festival engine to be loaded: it is not')
        self._stop_process(kill=True)
        process = _Process(self._program, self._work_dir)
        self._starts += 1
        self._process = process
        self._voice = None
        self._tag += 1
        # Queued at once; festival answers it when its start-up is done.
        process.send(SAVE_WAVE, self._tag)
        self._ready_tag = self._tag
        return process

    def _running(self, cancelled: threading.Event) -> Optional[_Process]:
        """The festival process, started (again) when there is none or it died, once ready; None when
        ``cancelled`` was set while it started (it goes on starting)."""
        process = self._process
        if process is None or process.popen.poll() is not None:
            process = self._start()
        if not process.ready:
            answer = process.answer(self._ready_tag, self._ready_timeout_s, cancelled)
            if answer == 'cancelled':
                return None
            if answer != 'ok':
                tail = process.stderr_tail(0)
                self._stop_process(kill=True)
                raise InstanceError('model_failed', f'festival did not start within {self._ready_timeout_s:g} s: '
                                                    f'{tail or "no output"}')
            process.ready = True
        return process

    def _call(self, process: _Process, form: str, timeout_s: float, cancelled: threading.Event) -> str:
        """'ok', 'error' (festival answered ER), 'cancelled', 'exited' or 'timeout'; after the last two the
        process is gone."""
        self._tag += 1
        since = process.stderr_size()
        try:
            process.send(form, self._tag)
        except OSError:  # BrokenPipeError: it had exited
            answer = 'gone'
        else:
            answer = process.answer(self._tag, timeout_s, cancelled)
        if answer == 'ok' or answer == 'cancelled':
            return answer
        if answer == 'error':
            self._last_error = process.stderr_tail(since) or 'a Scheme error'
            return 'error'
        exited = process.popen.poll()
        if exited is None:
            try:  # EOF on its stdout, or no answer yet: give it a moment to show which
                exited = process.popen.wait(0.05)
            except subprocess.TimeoutExpired:
                pass
        self._stop_process(kill=True)  # a fresh process serves the next sentence
        if exited is not None:
            self._last_error = f'the festival process exited ({exited})'
            return 'exited'
        self._last_error = f'no answer within {timeout_s:g} s'
        return 'timeout'

    def _stop_process(self, kill: bool) -> None:
        """Ends the process: ``kill`` at once (it hangs, or is being replaced), else by closing its stdin."""
        process, self._process = self._process, None
        self._voice = None
        if process is not None:
            if kill and process.popen.poll() is None:
                process.popen.kill()
            process.stop()

    def close(self) -> None:
        self._stop_process(kill=False)
        if self._work_dir is not None:
            shutil.rmtree(self._work_dir, ignore_errors=True)
            self._work_dir = None


def _read_wave(path: str) -> Audio:
    with wave.open(path, 'rb') as wav:
        channels, width, rate = wav.getnchannels(), wav.getsampwidth(), wav.getframerate()
        if channels != 1 or width != 2:
            raise InstanceError('model_failed', f'Expected mono 16-bit audio from festival: got {channels} channels '
                                                f'of {width * 8} bits')
        # RIFF data is little-endian whatever the machine: it goes out as it is.
        return Audio(rate, wav.readframes(wav.getnframes()))
