/** `capyctl`: finds the command named by the first words and runs it. */
import { allCommands, commandIndex } from './commandIndex.js';
import { exitCodes, printJson } from './command.js';
import { asFailure, failure, printFailure } from './failure.js';
import { closestCommands, leadingWords } from './suggest.js';

async function help(): Promise<string> {
  const commands = await allCommands();
  const lines = commands.map((c) => `  ${c.words.join(' ').padEnd(26)} ${c.summary}`);
  return (
    `capyctl: park, wake and switch language models on GPUs\n\ncommands:\n${lines.join('\n')}\n\nrun \`capyctl ` +
    `COMMAND --help\` for its usage and an example; \`capyctl --version\` for this capyctl's version\n`
  );
}

/** `capyctl 0.1.0 (commit 0123456789ab)`; under `--json`, the version and the whole commit. */
async function version(json: boolean): Promise<number> {
  const { buildInfo } = await import('../processes/build.js');
  const { version, commit } = buildInfo();
  if (json) printJson({ version, commit: commit ?? null });
  else process.stdout.write(`capyctl ${version}${commit ? ` (commit ${commit.slice(0, 12)})` : ''}\n`);
  return exitCodes.ok;
}

async function main(argv: readonly string[]): Promise<number> {
  const json = argv.includes('--json');
  if (argv[0] === '--version') return version(json);
  const entry = commandIndex.find((c) => c.words.every((w, i) => argv[i] === w));
  if (!entry) {
    if (argv.length === 0 || argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help') {
      process.stdout.write(await help());
      return exitCodes.ok;
    }
    const typed = leadingWords(argv);
    const suggestions = closestCommands(
      typed,
      commandIndex.map((c) => c.words),
    );
    return printFailure(await failure('unknownCommand', typed.join(' ') || argv[0]!, suggestions), json);
  }
  const command = await entry.load();
  const args = argv.slice(command.words.length);
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(`usage: ${command.usage}\n\n${command.summary}\n\nexample:\n  ${command.example}\n`);
    return exitCodes.ok;
  }
  try {
    return await command.run(args);
  } catch (e) {
    return printFailure(await asFailure(e, command.usage), json);
  }
}

// A reader that stopped reading (`capyctl list deployments | head -1`) ends the command quietly, as
// a Unix tool ends on SIGPIPE, instead of with a stack trace.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code !== 'EPIPE') throw e;
  process.exit(exitCodes.ok);
});
process.exitCode = await main(process.argv.slice(2));
