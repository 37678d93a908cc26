/**
 * The port the scheduler needs to run work on instances. The supervisor satisfies it; tests use a
 * FakeExecutor. The scheduler never imports the supervisor: both read the interface from the
 * shared vocabulary (protocol/work.ts).
 */
import type { WorkExecutor } from '../protocol/work.js';

export type Executor = WorkExecutor;
