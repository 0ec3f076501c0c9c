/** `capyctl`: finds the command named by the first words and runs it. */
import { commandIndex } from './commandIndex.js';
import { exitCodes } from './command.js';

async function help(): Promise<string> {
  const commands = await Promise.all(commandIndex.map((entry) => entry.load()));
  const lines = commands.map((c) => `  ${c.words.join(' ').padEnd(26)} ${c.summary}`);
  return (
    `capyctl: park, wake and switch language models on GPUs\n\ncommands:\n${lines.join('\n')}\n\nrun \`capyctl ` +
    `COMMAND --help\` for its usage and an example\n`
  );
}

async function main(argv: readonly string[]): Promise<number> {
  const entry = commandIndex.find((c) => c.words.every((w, i) => argv[i] === w));
  if (!entry) {
    const asked = argv.length === 0 || argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help';
    (asked ? process.stdout : process.stderr).write(
      asked ? await help() : `capyctl: unknown command "${argv.join(' ')}"\n\n${await help()}`,
    );
    return asked ? exitCodes.ok : exitCodes.usage;
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
    process.stderr.write(`capyctl: ${e instanceof Error ? e.message : String(e)}\n`);
    return exitCodes.usage;
  }
}

// A reader that stopped reading (`capyctl list deployments | head -1`) ends the command quietly, as
// a Unix tool ends on SIGPIPE, instead of with a stack trace.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code !== 'EPIPE') throw e;
  process.exit(exitCodes.ok);
});
process.exitCode = await main(process.argv.slice(2));
