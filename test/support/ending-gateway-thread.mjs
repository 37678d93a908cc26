// The entry point of the ending gateway thread (ending-gateway-thread-main.ts): a worker thread
// does not get the test runner's TypeScript loader, so it registers tsx's own before importing.
import { register } from 'tsx/esm/api';

register();
await import('./ending-gateway-thread-main.ts');
