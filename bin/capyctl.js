#!/usr/bin/env node
// The `capyctl` command: the TypeScript sources bundled into JavaScript once per version of the
// code (bin/cliBundle.js), so a call starts as fast as plain Node and never runs a stale build.
import { cliEntry } from './cliBundle.js';

// Stack traces in logs name the TypeScript sources, not the bundle's lines.
process.setSourceMapsEnabled(true);
await import(await cliEntry());
