// The OpenAPI document as committed in openapi.json: generated from the same
// schemas that validate requests, by a throwaway app on a temporary store.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createBasin } from './basin.js';
import { parseConfig } from './config.js';

export async function openApiDocument(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'basin-openapi-'));
  try {
    const basin = await createBasin(parseConfig([], { BASIN_DATA_DIR: dir, BASIN_DRIVER: 'sim' }));
    try {
      await basin.app.ready();
      return `${JSON.stringify(basin.app.swagger(), null, 2)}\n`;
    } finally {
      await basin.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
