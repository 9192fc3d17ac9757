#!/usr/bin/env node
// Entry point: TypeScript (ours and the schedule files) runs through tsx, no build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli.ts');
const code = await main(process.argv.slice(2));
// Let stdout/stderr drain, then leave even if a pool or timer lingers.
process.exitCode = code;
setImmediate(() => process.exit(code));
