/**
 * `capyctl completion bash`: a bash completion script made from the command table itself, so it
 * completes what this capyctl has: the commands' words, then each command's flags (from its usage),
 * and the choices its usage names first (`settings check standalone|server|host|deployment`).
 */
import { type Command, exitCodes } from '../command.js';
import { allCommands } from '../commandIndex.js';
import { failure } from '../failure.js';

/** A `case` pattern for `typed`; a trailing `*` (any words after) stays outside the quotes, a glob. */
const pattern = (typed: string) => (typed.endsWith('*') ? `"${typed.slice(0, -1)}"*` : `"${typed}"`);

/** One `case` branch: when the words typed so far match one of `typed`, offer `offers`. */
const branch = (typed: readonly string[], offers: readonly string[]) =>
  `    ${typed.map(pattern).join('|')}) offers='${offers.join(' ')}' ;;`;

const unique = (items: readonly string[]) => [...new Set(items)];

/** What a command's usage offers after its words: the choices it names first, else its flags. */
function offersOf(command: Command): { choices: string[]; flags: string[] } {
  const rest = command.usage.split(/\s+/).slice(1 + command.words.length);
  const first = rest[0] ?? '';
  const choices = /^[a-z]+(\|[a-z]+)+$/.test(first) ? first.split('|') : [];
  const flags = unique([...(command.usage.match(/--[a-z][a-z-]*/g) ?? []), '--help']);
  return { choices, flags };
}

export function bashCompletion(commands: readonly Command[]): string {
  const branches: string[] = [];
  for (const command of commands) {
    const words = command.words.join(' ');
    const { choices, flags } = offersOf(command);
    if (choices.length > 0) branches.push(branch([words], choices));
    branches.push(branch(choices.length > 0 ? [`${words} *`] : [words, `${words} *`], flags));
  }
  // The words that may come next after each command's leading words: `start` → deployment, server, …
  const next = new Map<string, string[]>();
  for (const { words } of commands)
    for (let i = 0; i < words.length; i++) {
      const before = words.slice(0, i).join(' ');
      next.set(before, unique([...(next.get(before) ?? []), words[i]!]));
    }
  for (const [before, words] of next)
    branches.push(branch([before], before === '' ? [...words, '--help', '--version'] : words));
  return [
    '# bash completion for capyctl (capyctl completion bash): source <(capyctl completion bash), e.g. in ~/.bashrc',
    '_capyctl() {',
    '  local cur=${COMP_WORDS[COMP_CWORD]} typed="${COMP_WORDS[*]:1:COMP_CWORD-1}" offers=',
    '  case "$typed" in',
    ...branches,
    '  esac',
    '  COMPREPLY=($(compgen -W "$offers" -- "$cur"))',
    '}',
    // Nothing offered (a --file's value): file names, as bash completes them anyway.
    'complete -o default -F _capyctl capyctl',
    '',
  ].join('\n');
}

export const completionBash: Command = {
  words: ['completion', 'bash'],
  summary: 'print a bash completion script for capyctl: its commands, their flags and choices',
  usage: 'capyctl completion bash',
  example: 'source <(capyctl completion bash)',
  async run(args) {
    if (args.length > 0) throw await failure('usage', this.usage);
    process.stdout.write(bashCompletion(await allCommands()));
    return exitCodes.ok;
  },
};
