/**
 * What a label says where there is nothing to name: Prometheus reads an empty value as the label's
 * absence, so a series with it would not match a selector that names the label.
 */
import type { ParkTier } from '../domain/vocabulary.js';

export const NONE = 'none';

/** The `park_tier` label: the tier, or `none` for what is not parked (a phase other than a park or a wake). */
export const parkTierLabel = (tier: ParkTier | null): ParkTier | typeof NONE => tier ?? NONE;
