/**
 * The document `capyctl start standalone` runs on when no `--file` is given: one simulated 8 GiB
 * card, every engine played by the engine simulator, and the example models of deploy/examples/ —
 * two models that do not fit the card together, so two requests to them show a switch.
 */
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { engineNames } from '../domain/vocabulary.js';

const CAPYCTL = fileURLToPath(new URL('../bin/capyctl.js', import.meta.url));

export function embeddedStandaloneDocument(): { text: string; origin: string } {
  const engines = Object.fromEntries(
    engineNames.options.map((engine) => [engine, { command: [process.execPath, CAPYCTL, 'sim', engine] }]),
  );
  const document = { examples: true, host: { gpus: [{ memory: '8GiB' }], engines } };
  return { text: YAML.stringify(document), origin: 'the embedded standalone defaults' };
}
