/** Bearer API keys, compared in constant time (digests of equal length, every key checked). */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { REALTIME_KEY_SUBPROTOCOL_PREFIX } from '../api/realtime.js';
import { errors } from '../core/error-catalog.js';

export function createKeyChecker(apiKeys: readonly string[]): (authorization: string | undefined) => void {
  const digests = apiKeys.map((k) => createHash('sha256').update(k).digest());
  return (authorization) => {
    if (digests.length === 0) return;
    // A Bearer header with only spaces after it carries no key: missing, like no header at all.
    const key = /^Bearer\s+(.*)$/i.exec(authorization ?? '')?.[1]?.trim() ?? '';
    if (key === '') throw errors.missingApiKey();
    const given = createHash('sha256').update(key).digest();
    let isValid = false;
    for (const d of digests) isValid = timingSafeEqual(d, given) || isValid;
    if (!isValid) throw errors.invalidApiKey();
  };
}

/**
 * The call's Authorization: its header, or for a WebSocket opened by a browser (which cannot set
 * headers) the key in its `openai-insecure-api-key.<key>` subprotocol, as the openai SDK sends it.
 */
export function authorizationOf(headers: IncomingHttpHeaders): string | undefined {
  if (headers.authorization !== undefined) return headers.authorization;
  const protocols = String(headers['sec-websocket-protocol'] ?? '').split(',');
  const key = protocols.map((p) => p.trim()).find((p) => p.startsWith(REALTIME_KEY_SUBPROTOCOL_PREFIX));
  return key === undefined ? undefined : `Bearer ${key.slice(REALTIME_KEY_SUBPROTOCOL_PREFIX.length)}`;
}
