import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_PROMPT_CHARS } from '../../api/transcription.js';
import { applySessionUpdate, DEFAULT_TURN_DETECTION, newSessionSettings, toSessionObject, type SessionSettings } from './session-config.js';

const BASE: SessionSettings = newSessionSettings({ kind: 'realtime', model: 'gpt-realtime', instructions: 'Be brief.' });

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    return (err as { code: string }).code;
  }
  return 'none';
}

describe('session.update (GA and beta shapes)', () => {
  it('GA: nested audio settings, G.711 formats, VAD settings and transcription', () => {
    const next = applySessionUpdate(
      BASE,
      {
        type: 'realtime',
        audio: {
          input: {
            format: { type: 'audio/pcmu' },
            transcription: { model: 'whisper-1', language: 'en' },
            turn_detection: { type: 'server_vad', threshold: 0.7, silence_duration_ms: 300 },
          },
          output: { format: { type: 'audio/pcma' }, voice: 'ash' },
        },
        output_modalities: ['text'],
      },
      'ga',
    );
    assert.equal(next.inputFormat, 'g711_ulaw');
    assert.equal(next.outputFormat, 'g711_alaw');
    assert.equal(next.voice, 'ash');
    assert.deepEqual(next.outputModalities, ['text']);
    assert.deepEqual([next.transcriptionModel, next.language], ['whisper-1', 'en']);
    assert.deepEqual(next.turnDetection, { ...DEFAULT_TURN_DETECTION, threshold: 0.7, silenceDurationMs: 300 });
    assert.equal(BASE.inputFormat, 'pcm16', 'the current settings are not changed');
  });

  it('turn_detection null turns server VAD off (client commits)', () => {
    assert.equal(applySessionUpdate(BASE, { type: 'realtime', audio: { input: { turn_detection: null } } }, 'ga').turnDetection, undefined);
    assert.equal(applySessionUpdate(BASE, { turn_detection: null }, 'beta').turnDetection, undefined);
  });

  it('beta: flat fields', () => {
    const next = applySessionUpdate(
      BASE,
      { input_audio_format: 'g711_alaw', output_audio_format: 'g711_ulaw', modalities: ['text', 'audio'], voice: 'echo' },
      'beta',
    );
    assert.deepEqual(
      [next.inputFormat, next.outputFormat, next.voice, next.outputModalities],
      ['g711_alaw', 'g711_ulaw', 'echo', ['audio']],
    );
  });

  it('rejects what cannot be honoured, each with its code', () => {
    assert.equal(
      codeOf(() => applySessionUpdate(BASE, { audio: {} }, 'ga')),
      'missing_parameter',
    );
    assert.equal(
      codeOf(() => applySessionUpdate(BASE, { type: 'realtime', audio: { input: { format: { type: 'audio/pcm', rate: 16000 } } } }, 'ga')),
      'unsupported_realtime_audio_format',
    );
    assert.equal(
      codeOf(() => applySessionUpdate(BASE, { input_audio_format: 'opus' }, 'beta')),
      'unsupported_realtime_audio_format',
    );
    assert.equal(
      codeOf(() => applySessionUpdate(BASE, { turn_detection: { type: 'semantic_vad' } }, 'beta')),
      'invalid_parameter',
    );
    assert.equal(
      codeOf(() => applySessionUpdate(BASE, { turn_detection: { threshold: 2 } }, 'beta')),
      'invalid_parameter',
    );
    assert.equal(
      codeOf(() => applySessionUpdate(BASE, { speed: 3 }, 'beta')),
      'invalid_parameter',
    );
    assert.equal(
      codeOf(() => applySessionUpdate(BASE, 'x', 'beta')),
      'invalid_parameter',
    );
    // The transcription prompt is held to the transcription API's limit.
    const prompt = (length: number) => ({ input_audio_transcription: { model: 'whisper-1', prompt: 'a'.repeat(length) } });
    assert.equal(
      codeOf(() => applySessionUpdate(BASE, prompt(MAX_PROMPT_CHARS), 'beta')),
      'none',
    );
    assert.equal(
      codeOf(() => applySessionUpdate(BASE, prompt(MAX_PROMPT_CHARS + 1), 'beta')),
      'invalid_parameter',
    );
  });

  it('the session object has the client shape: GA nested with format objects, beta flat', () => {
    const ga = toSessionObject({ ...BASE, outputFormat: 'g711_ulaw' }, { sessionId: 'sess_1', shape: 'ga' }) as {
      audio: { input: { format: unknown }; output: { format: unknown } };
    };
    assert.deepEqual(ga.audio.input.format, { type: 'audio/pcm', rate: 24000 });
    assert.deepEqual(ga.audio.output.format, { type: 'audio/pcmu' });
    const beta = toSessionObject(BASE, { sessionId: 'sess_1', shape: 'beta' });
    assert.equal(beta.input_audio_format, 'pcm16');
    assert.deepEqual(beta.modalities, ['audio', 'text']);
    assert.equal(toSessionObject({ ...BASE, kind: 'transcription' }, { sessionId: 's', shape: 'ga' }).type, 'transcription');
  });

  it('tools and tool_choice: function tools in both shapes, echoed in the session object; a bad tool is invalid_parameter', () => {
    const tool = { type: 'function', name: 'book_table', description: 'Books a table.', parameters: { type: 'object' } };
    const ga = applySessionUpdate(BASE, { type: 'realtime', tools: [tool], tool_choice: { type: 'function', name: 'book_table' } }, 'ga');
    assert.deepEqual(ga.tools, [{ name: 'book_table', description: 'Books a table.', parameters: { type: 'object' } }]);
    assert.deepEqual(ga.toolChoice, { name: 'book_table' });
    assert.deepEqual(toSessionObject(ga, { sessionId: 's', shape: 'ga' }).tools, [tool]);
    assert.deepEqual(toSessionObject(ga, { sessionId: 's', shape: 'ga' }).tool_choice, { type: 'function', name: 'book_table' });
    const beta = applySessionUpdate(BASE, { tools: [{ type: 'function', name: 'f' }], tool_choice: 'required' }, 'beta');
    assert.deepEqual(beta.tools, [{ name: 'f', description: '', parameters: { type: 'object', properties: {} } }]);
    assert.equal(beta.toolChoice, 'required');
    for (const bad of [
      { tools: 'f' },
      { tools: [{ type: 'web_search' }] },
      { tools: [{ type: 'function', name: 'a b' }] },
      { tool_choice: 'sometimes' },
    ]) {
      assert.equal(
        codeOf(() => applySessionUpdate(BASE, bad, 'beta')),
        'invalid_parameter',
        JSON.stringify(bad),
      );
    }
  });

  it('a speed out of range names the field the client sent: GA session.audio.output.speed, beta session.speed', () => {
    const paramOf = (fn: () => unknown) => {
      try {
        fn();
      } catch (err) {
        return [(err as { code: string }).code, (err as { param?: string }).param];
      }
      return ['none'];
    };
    assert.deepEqual(
      paramOf(() => applySessionUpdate(BASE, { type: 'realtime', audio: { output: { speed: 3 } } }, 'ga')),
      ['invalid_parameter', 'session.audio.output.speed'],
    );
    assert.deepEqual(
      paramOf(() => applySessionUpdate(BASE, { speed: 0.1 }, 'beta')),
      ['invalid_parameter', 'session.speed'],
    );
  });

  it('GA: audio.output.voice may be a custom voice reference {id}, as on POST /v1/audio/speech', () => {
    const next = applySessionUpdate(BASE, { type: 'realtime', audio: { output: { voice: { id: 'vits-3' } } } }, 'ga');
    assert.equal(next.voice, 'vits-3');
    assert.equal(
      codeOf(() => applySessionUpdate(BASE, { type: 'realtime', audio: { output: { voice: { name: 'x' } } } }, 'ga')),
      'invalid_parameter',
    );
  });
});
