/** `capyctl`: finds the command named by the first words and runs it. */
import { type Command, exitCodes } from './command.js';
import { createHostToken, revokeHostToken } from './commands/hostToken.js';
import { deleteDeployment, parkDeployment, preinitializeDeployment, stopDeployment } from './commands/deploymentCommands.js';
import { deployModel } from './commands/deployModel.js';
import { drainHost, undrainHost } from './commands/drainHost.js';
import { engineList } from './commands/engineList.js';
import { listDeployments } from './commands/listDeployments.js';
import { listHosts } from './commands/listHosts.js';
import { settingsCheck } from './commands/settingsCheck.js';
import { sim } from './commands/sim.js';
import { startHost } from './commands/startHost.js';
import { startDeployment } from './commands/startDeployment.js';
import { startServer } from './commands/startServer.js';
import { startStandalone } from './commands/startStandalone.js';
import { statusDeployment } from './commands/statusDeployment.js';

const commands: readonly Command[] = [
  deployModel,
  startDeployment,
  parkDeployment,
  stopDeployment,
  preinitializeDeployment,
  deleteDeployment,
  listDeployments,
  statusDeployment,
  listHosts,
  drainHost,
  undrainHost,
  createHostToken,
  revokeHostToken,
  engineList,
  settingsCheck,
  startStandalone,
  startServer,
  startHost,
  sim,
];

function help(): string {
  const lines = commands.map((c) => `  ${c.words.join(' ').padEnd(26)} ${c.summary}`);
  return `capyctl: park, wake and switch language models on GPUs\n\ncommands:\n${lines.join('\n')}\n\nrun \`capyctl COMMAND --help\` for its usage and an example\n`;
}

async function main(argv: readonly string[]): Promise<number> {
  const command = commands.find((c) => c.words.every((w, i) => argv[i] === w));
  if (!command) {
    const asked = argv.length === 0 || argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help';
    (asked ? process.stdout : process.stderr).write(asked ? help() : `capyctl: unknown command "${argv.join(' ')}"\n\n${help()}`);
    return asked ? exitCodes.ok : exitCodes.usage;
  }
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

process.exitCode = await main(process.argv.slice(2));
