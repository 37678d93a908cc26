/**
 * A multipart/form-data body built once and sent as is by every request of a run: the client
 * then spends no CPU per request re-encoding the same upload (FormData streams a Blob in small
 * copied chunks, which at hundreds of 1.4 MB uploads a second costs the client more than the
 * server's whole request path).
 */
import { randomBytes } from 'node:crypto';

export interface MultipartFile {
  field: string;
  fileName: string;
  contentType: string;
  bytes: Uint8Array;
}

export interface MultipartBody {
  /** The value of the Content-Type header, with the boundary. */
  contentType: string;
  body: Uint8Array;
}

/** Encodes the file part first, then the text fields in order (RFC 7578). */
export function buildMultipartBody(file: MultipartFile, fields: ReadonlyArray<readonly [string, string]>): MultipartBody {
  const boundary = `voxmux-bench-${randomBytes(12).toString('hex')}`;
  const quote = (value: string) => value.replace(/["\r\n\\]/g, (c) => encodeURIComponent(c));
  const parts: Buffer[] = [
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="${quote(file.field)}"; filename="${quote(file.fileName)}"\r\n` +
        `Content-Type: ${file.contentType}\r\n\r\n`,
    ),
    Buffer.from(file.bytes.buffer, file.bytes.byteOffset, file.bytes.byteLength),
    Buffer.from('\r\n'),
  ];
  for (const [name, value] of fields) {
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${quote(name)}"\r\n\r\n${value}\r\n`));
  }
  parts.push(Buffer.from(`--${boundary}--\r\n`));
  return { contentType: `multipart/form-data; boundary=${boundary}`, body: new Uint8Array(Buffer.concat(parts)) };
}
