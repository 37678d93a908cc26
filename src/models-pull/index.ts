/**
 * `voxmux models pull`: downloads model files from the Hugging Face Hub (or a mirror) into a
 * predictable folder, resumably and verified, and prints the config entry of the adapter that
 * loads them. app/cli.ts runs it; nothing in the server imports it.
 */
export { DEFAULT_ENDPOINT, MODELS_USAGE, PULL_USAGE, runModelsCli, type ModelsCliDeps, type ModelsPullEnvironment } from './models-cli.js';
