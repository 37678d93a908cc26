/**
 * deploy/docker: the container images' Dockerfiles, linted with dockerfile-utils (the linter of the
 * Docker language server) and checked for what an image must have here: several stages, pinned
 * base images, a non-root user and a health check in the final stage, and the files voxmux runs
 * from. The images are not built in the tests (docs/deploy.md).
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { validate } from 'dockerfile-utils';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DIR = join(ROOT, 'deploy/docker');
const DOCKERFILES = readdirSync(DIR).filter((f) => f.startsWith('Dockerfile'));

interface Instruction {
  keyword: string;
  args: string;
  line: number;
}

/** The instructions, continuation lines joined; comments and blank lines dropped. */
function instructions(text: string): Instruction[] {
  const out: Instruction[] = [];
  let pending: { text: string; line: number } | undefined;
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (pending === undefined && (line === '' || line.startsWith('#'))) return;
    if (pending !== undefined && line.startsWith('#')) return;
    const body = line.endsWith('\\') ? line.slice(0, -1) : line;
    pending = pending === undefined ? { text: body, line: i + 1 } : { text: `${pending.text} ${body}`, line: pending.line };
    if (!line.endsWith('\\')) {
      const [keyword = '', ...rest] = pending.text.split(/\s+/);
      out.push({ keyword: keyword.toUpperCase(), args: rest.join(' '), line: pending.line });
      pending = undefined;
    }
  });
  return out;
}

/** Every problem found in one Dockerfile; empty when it is sound. */
function checkDockerfile(text: string): string[] {
  const problems = validate(text).map((d) => `line ${d.range.start.line + 1}: ${d.message}`);
  const all = instructions(text);
  const froms = all.filter((i) => i.keyword === 'FROM');
  if (froms.length < 2) problems.push('not multi-stage: one FROM');
  const stages = new Set<string>();
  for (const from of froms) {
    const [image = '', as, stage] = from.args.split(/\s+/);
    if (stages.has(image)) continue; // an earlier stage, not a base image
    const tag = image.includes('@sha256:') ? 'digest' : (image.split(':')[1] ?? '');
    if (tag === '' || tag === 'latest' || !/\d+\.\d+/.test(tag))
      problems.push(`line ${from.line}: base image ${image} is not pinned to a version`);
    if (as?.toUpperCase() === 'AS' && stage !== undefined) stages.add(stage);
  }
  const lastFrom = all.lastIndexOf(froms.at(-1)!);
  const final = all.slice(lastFrom);
  const user = final.filter((i) => i.keyword === 'USER').at(-1);
  if (user === undefined) problems.push('the final stage sets no USER: it would run as root');
  else if (/^(root|0)(:|$)/.test(user.args)) problems.push(`line ${user.line}: USER ${user.args} is root`);
  const healthcheck = final.find((i) => i.keyword === 'HEALTHCHECK');
  if (healthcheck === undefined || /^NONE$/i.test(healthcheck.args)) problems.push('the final stage has no HEALTHCHECK');
  else if (!healthcheck.args.includes('/health/'))
    problems.push(`line ${healthcheck.line}: the HEALTHCHECK does not ask /health/ready or /health/live`);
  if (!final.some((i) => i.keyword === 'ENTRYPOINT' && i.args.includes('bin/voxmux.mjs')))
    problems.push('the final stage does not run bin/voxmux.mjs');
  // What the image copies from the build context must exist in the repository.
  for (const copy of all.filter((i) => i.keyword === 'COPY' && !i.args.startsWith('--from'))) {
    const sources = copy.args.split(/\s+/).slice(0, -1);
    for (const source of sources)
      if (!existsSync(join(ROOT, source))) problems.push(`line ${copy.line}: COPY ${source}: no such path in the repository`);
  }
  return problems;
}

describe('Dockerfiles (deploy/docker)', () => {
  it('has a CPU and a GPU image', () => {
    assert.deepEqual(DOCKERFILES.sort(), ['Dockerfile.cpu', 'Dockerfile.gpu']);
    assert.match(readFileSync(join(DIR, 'Dockerfile.cpu'), 'utf8'), /^FROM node:20[\d.]*-bookworm-slim AS runtime$/m);
    assert.match(readFileSync(join(DIR, 'Dockerfile.gpu'), 'utf8'), /^FROM nvidia\/cuda:[\d.]+-cudnn-runtime-\S+ AS runtime$/m);
    assert.match(readFileSync(join(DIR, 'Dockerfile.gpu'), 'utf8'), /torch==\d+\.\d+\.\d+/);
  });

  for (const file of DOCKERFILES) {
    it(`${file} lints clean, is multi-stage, pins its bases, runs as non-root with a health check`, () => {
      assert.deepEqual(checkDockerfile(readFileSync(join(DIR, file), 'utf8')), []);
    });
  }

  it('fails on invalid edits: a typo, a bad flag, root, no health check, an unpinned base', () => {
    const text = readFileSync(join(DIR, 'Dockerfile.cpu'), 'utf8');
    const edits: { what: string; edited: string; expect: RegExp }[] = [
      { what: 'an unknown instruction', edited: text.replace('WORKDIR /app', 'WORKDRI /app'), expect: /Unknown instruction: WORKDRI/ },
      { what: 'an unknown flag', edited: text.replace('--start-period=', '--start-perod='), expect: /Unknown flag: start-perod/ },
      { what: 'running as root', edited: text.replace('USER 10001:10001', 'USER root'), expect: /USER root is root/ },
      { what: 'no user', edited: text.replace('USER 10001:10001\n', ''), expect: /sets no USER/ },
      { what: 'no health check', edited: text.replace(/HEALTHCHECK[^\n]*\\\n[^\n]*\n/, ''), expect: /no HEALTHCHECK/ },
      {
        what: 'an unpinned base',
        edited: text.replace('FROM node:20.20.2-bookworm-slim AS build', 'FROM node:latest AS build'),
        expect: /not pinned/,
      },
      { what: 'a missing source', edited: text.replace('COPY bin ./bin', 'COPY binaries ./bin'), expect: /COPY binaries: no such path/ },
    ];
    for (const { what, edited, expect } of edits) {
      assert.notEqual(edited, text, `${what}: the edit applies`);
      assert.match(checkDockerfile(edited).join('\n'), expect, what);
    }
  });
});
