#!/usr/bin/env node
// The `capyctl` command. The sources are TypeScript run through tsx: no build step to forget.
import { register } from 'tsx/esm/api';

register();
await import('../cli/main.ts');
