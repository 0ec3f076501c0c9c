/**
 * Which releases of each engine capyctl knows, and what it sends each: read from the contract's
 * `versions` table. An engine reports its version as its build names it (`0.17.0+cu128`,
 * `0.11.0rc2.dev12+g1a2b`, `0.5.4.post1`); a release is compared on its first three numbers, so a
 * pre-release, post-release or local build counts as the release it names.
 */
import type { EngineName } from '../domain/vocabulary.js';
import { engineContracts, type SupportedVersions, type VersionRequests } from './contracts.js';

type Release = readonly [number, number, number];

/** The release a version string names; undefined when it names none. */
export function releaseOf(version: string): Release | undefined {
  const m = /^v?(\d+)\.(\d+)(?:\.(\d+))?/.exec(version.trim());
  return m ? [Number(m[1]), Number(m[2]), Number(m[3] ?? 0)] : undefined;
}

function compare(a: Release, b: Release): number {
  return a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
}

/** True when `version` names `release` or a later one; false when it names none. */
export function atLeast(version: string, release: string): boolean {
  const own = releaseOf(version);
  return own !== undefined && compare(own, releaseOf(release)!) >= 0;
}

const within = (release: Release, range: SupportedVersions): boolean =>
  compare(release, releaseOf(range.from)!) >= 0 && compare(release, releaseOf(range.below)!) < 0;

/** The table's range holding `version`; undefined for a version capyctl does not know. */
export function supportedRange(engine: EngineName, version: string): SupportedVersions | undefined {
  const release = releaseOf(version);
  return release && engineContracts[engine].versions.find((range) => within(release, range));
}

/** "0.10.1 up to (not including) 0.32.0": every release the table holds, which are contiguous. */
/** The host document's setting that runs an unlisted version of `engine`. */
export const unlistedVersionSetting = (engine: EngineName) => `engines.${engine}.unlisted_version_as`;

export function supportedSpan(engine: EngineName): string {
  const { versions } = engineContracts[engine];
  return `${versions[0]!.from} up to (not including) ${versions.at(-1)!.below}`;
}

/** An engine's version as the start read it, and what its park and wake send. */
export interface CheckedVersion {
  /** As the engine reported it; null when it reported none. */
  reported: string | null;
  /** The listed version whose requests it is sent: its own, or the host's `unlisted_version_as`. */
  treatedAs: string;
  sends: VersionRequests;
}

export type VersionVerdict = { ok: true; checked: CheckedVersion } | { ok: false; reported: string | null };

/**
 * What a started engine is sent, from the version it reported: a listed version's requests, or for
 * an unlisted one (or none reported) the requests of `unlistedAs`, the host's explicit choice; with
 * neither, it is refused.
 */
export function judgeVersion(
  engine: EngineName,
  reported: string | null,
  unlistedAs: string | undefined,
): VersionVerdict {
  const own = reported === null ? undefined : supportedRange(engine, reported);
  if (own) return { ok: true, checked: { reported, treatedAs: reported!, sends: own.sends } };
  const chosen = unlistedAs === undefined ? undefined : supportedRange(engine, unlistedAs);
  if (chosen) return { ok: true, checked: { reported, treatedAs: unlistedAs!, sends: chosen.sends } };
  return { ok: false, reported };
}
