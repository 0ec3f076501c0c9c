/**
 * What a host's `engines` section is refused for before its agent starts: a command holding an option
 * that parks the engine on its own (contracts.ts `selfParkOptions`), and an `unlisted_version_as` that
 * names no version capyctl knows.
 */
import { engineSettingRefusals } from '../domain/catalogue.js';
import type { EngineName } from '../domain/vocabulary.js';
import type { HostSettings } from '../settings/hostDocument.js';
import { engineContracts } from './contracts.js';
import { supportedRange, supportedSpan, unlistedVersionSetting } from './engineVersions.js';
import { findOption } from './launchOptions.js';

/** The first option of `args` that parks `engine` on its own; undefined when none does. */
export const selfParkOptionIn = (engine: EngineName, args: readonly string[]): string | undefined =>
  engineContracts[engine].selfParkOptions.find((option) => findOption(args, option) !== undefined);

/** Every problem of the section, each naming its setting; empty when it may run. */
export function hostEnginesRefusals(engines: HostSettings['engines']): string[] {
  return (Object.keys(engines) as EngineName[]).flatMap((engine) => {
    const { command, unlisted_version_as: unlistedAs } = engines[engine];
    const { label } = engineContracts[engine];
    const problems: string[] = [];
    const option = selfParkOptionIn(engine, command);
    if (option) problems.push(engineSettingRefusals.selfParkOption(`engines.${engine}.command`, option, label));
    if (unlistedAs !== undefined && !supportedRange(engine, unlistedAs))
      problems.push(
        engineSettingRefusals.unlistedAsUnknown(
          unlistedVersionSetting(engine),
          unlistedAs,
          label,
          supportedSpan(engine),
        ),
      );
    return problems;
  });
}
