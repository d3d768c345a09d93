// `basin store …`: moving an installation's store (docs/decisions.md, "The
// store on PostgreSQL").

import { OPTIONS, parseStoreConfig } from '../config.js';
import type { CliGroup } from './command.js';
import { DATA_DIR } from './global-options.js';

export const storeGroup: CliGroup = {
  name: 'store',
  summary: 'The store itself: move a SQLite installation to PostgreSQL.',
  commands: [
    {
      name: 'migrate',
      kind: 'plain',
      args: [],
      options: {
        to: { value: 'url', help: 'the empty PostgreSQL store to copy into (postgres://…)' },
      },
      usage: [['migrate --to <url>', "copy the data directory's SQLite store into PostgreSQL"]],
      details: [
        "Copies everything in the data directory's SQLite store (basin.db) into an",
        'empty PostgreSQL database, in one transaction; a store that is not empty is',
        'refused. Stop the Basin that runs on the data directory first (the command',
        'refuses while one does), then start it with --store-url <url>: it serves the',
        'same projects, credentials and services. basin.db is left as it was.',
      ].join('\n'),
      examples: ['basin --data-dir /var/lib/basin store migrate --to postgres://basin@db/basin'],
      check: (opt) => (opt('to') === undefined ? 'store migrate needs --to <url>.' : undefined),
      async run(c) {
        const dataDir = c.opt(DATA_DIR);
        const to = c.opt('to') as string;
        const config = parseStoreConfig(
          [
            ...(dataDir === undefined ? [] : [OPTIONS.dataDir.flag, dataDir]),
            OPTIONS.storeUrl.flag,
            to,
          ],
          c.env,
        );
        const { migrateStore } = await import('../open-store.js');
        const { rows } = await migrateStore(config.dataDir, to);
        if (c.json) c.print(rows);
        else
          c.out(
            Object.entries(rows)
              .map(([table, n]) => `${table} ${n}\n`)
              .join(''),
          );
      },
    },
  ],
};
