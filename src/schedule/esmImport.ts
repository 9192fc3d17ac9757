import { register as registerHooks } from 'node:module';
import { sep } from 'node:path';
import { pathToFileURL } from 'node:url';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { register as registerTsx } from 'tsx/esm/api';

/** Imports a module by file URL; what the loader calls for each schedule file. */
export type ModuleImport = (url: string) => Promise<Record<string, unknown>>;

// Module hook (it runs in Node's hooks thread, so it is plain JavaScript). It resolves every
// .ts/.mts/.js/.mjs file under a schedules folder as an ES module, whatever the nearest
// package.json's "type" says: in a default npm project (no "type") Node and tsx would
// otherwise read schedules/x.ts as CommonJS, where top-level await and import.meta fail and
// `import 'cronq'` becomes require(esm). It sits below tsx's hooks in the chain (registered
// before them): tsx keeps a format the next resolver gave, then compiles the file as ESM.
// Folders arrive over the port; each is acknowledged before the loader imports from it.
const FORCE_ESM_HOOK = `
const folders = [];
export function initialize({ port }) {
  port.on('message', ({ folderUrl }) => { folders.push(folderUrl); port.postMessage(folderUrl); });
  port.unref();
}
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  const url = resolved.url;
  if (url.startsWith('file:') && /\\.(ts|mts|js|mjs)$/.test(new URL(url).pathname) && folders.some((f) => url.startsWith(f))) {
    return { ...resolved, format: 'module' };
  }
  return resolved;
}
`;

let port: MessagePort | null = null;
/** Folders sent and not yet acknowledged: the port keeps the process alive only while some are. */
let unacknowledged = 0;
const folders = new Map<string, Promise<void>>();

/** Registers the hooks once per process: ours, then tsx's above it. */
function hooks(): MessagePort {
  if (!port) {
    const channel = new MessageChannel();
    registerHooks(`data:text/javascript,${encodeURIComponent(FORCE_ESM_HOOK)}`, {
      data: { port: channel.port2 },
      transferList: [channel.port2],
    });
    registerTsx();
    port = channel.port1;
    port.unref();
  }
  return port;
}

/**
 * Prepares importing the schedule files of folder `dir` (absolute) and returns the
 * importer: each file loads as an ES module through tsx (TypeScript or JavaScript, whatever
 * the app's package type), and `import 'cronq'` in it resolves as Node resolves it from that
 * file, to the app's installed copy (the one running this code when the CLI is that copy's).
 * Registers tsx's hooks for the whole process the first time (they stay, so a handler's
 * later dynamic import of a .ts file works too).
 */
export async function esmImporterFor(dir: string): Promise<ModuleImport> {
  const folderUrl = pathToFileURL(dir.endsWith(sep) ? dir : dir + sep).href;
  let known = folders.get(folderUrl);
  if (!known) {
    const channel = hooks();
    known = new Promise<void>((resolve) => {
      const acknowledged = (url: string) => {
        if (url !== folderUrl) return;
        channel.off('message', acknowledged);
        if (--unacknowledged === 0) channel.unref();
        resolve();
      };
      channel.on('message', acknowledged);
      if (unacknowledged++ === 0) channel.ref();
      channel.postMessage({ folderUrl });
    });
    folders.set(folderUrl, known);
  }
  await known;
  return (url) => import(url) as Promise<Record<string, unknown>>;
}
