// Options every command takes, anywhere on the line. The data directory is
// the server's own option (src/config.ts): same flag, variable and default.

import { OPTIONS } from '../config.js';
import type { CliOption } from './command.js';

/** `data-dir`: the long name parseArgs knows the server's flag by. */
export const DATA_DIR = OPTIONS.dataDir.flag.replace(/^--/, '');
/** `store-url`: likewise. */
export const STORE_URL = OPTIONS.storeUrl.flag.replace(/^--/, '');

export const GLOBAL_OPTIONS: Readonly<Record<string, CliOption>> = {
  [DATA_DIR]: {
    value: 'dir',
    help: `the server's data directory (env ${OPTIONS.dataDir.env}, default ${OPTIONS.dataDir.default});\ncreated if missing`,
  },
  [STORE_URL]: {
    value: 'url',
    help: `the server's PostgreSQL store, if it has one (env ${OPTIONS.storeUrl.env})`,
  },
  json: { help: 'print JSON, for scripts' },
  help: { short: 'h', help: 'show help' },
};
