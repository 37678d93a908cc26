/** Bearer API keys, compared in constant time (digests of equal length, every key checked). */
import { createHash, timingSafeEqual } from 'node:crypto';
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
