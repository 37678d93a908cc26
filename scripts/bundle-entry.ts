import { runCli } from '../src/app/cli.js';

process.exit(await runCli(process.argv.slice(2)));
