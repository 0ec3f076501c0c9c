/**
 * The version check of a start: the engine, once it answers its readiness route, is asked its version,
 * and a version the contract table does not list is refused unless the host names the listed version
 * whose requests it takes (`engines.<name>.unlisted_version_as`).
 */
import { hostStepFailures } from '../../domain/catalogue.js';
import { engineContracts } from '../../engines/contracts.js';
import { type CallOptions, type EngineAdapter, type EngineEndpoint, EngineError } from '../../engines/engine.js';
import {
  type CheckedVersion,
  judgeVersion,
  supportedSpan,
  unlistedVersionSetting,
} from '../../engines/engineVersions.js';

export async function checkEngineVersion(
  adapter: EngineAdapter,
  endpoint: EngineEndpoint,
  unlistedAs: string | undefined,
  options: CallOptions = {},
): Promise<CheckedVersion> {
  const reported = await adapter.version(endpoint, options);
  const verdict = judgeVersion(adapter.name, reported, unlistedAs);
  if (verdict.ok) return verdict.checked;
  const { label, versionRoute } = engineContracts[adapter.name];
  throw new EngineError(
    'version_unsupported',
    hostStepFailures.engineVersionUnsupported(
      label,
      reported,
      versionRoute,
      supportedSpan(adapter.name),
      unlistedVersionSetting(adapter.name),
    ),
  );
}
