// Writes docs/config.md, docs/errors.md and docs/metrics.md from the code, and the Python host's
// protocol messages (host/voxmux_host/messages.py) from the message table.
import { writeFileSync } from 'node:fs';
import { renderConfigDoc, renderErrorsDoc, renderMetricsDoc } from '../src/app/reference-docs.js';
import { writePythonMessages } from './gen-protocol.js';

writeFileSync(new URL('../docs/config.md', import.meta.url), renderConfigDoc());
writeFileSync(new URL('../docs/errors.md', import.meta.url), renderErrorsDoc());
writeFileSync(new URL('../docs/metrics.md', import.meta.url), await renderMetricsDoc());
writePythonMessages();
