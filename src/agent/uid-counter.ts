// The high-water mark of the uids this host gives services' OS users. On a
// host of its own there is no store to keep it in (a one-machine Basin keeps
// it in its store): a file, written and synced before the uid is handed
// out, so a uid is never given twice, across restarts too
// (docs/security.md).

import {
  closeSync,
  existsSync,
  fsyncSync,
  openSync,
  readFileSync,
  renameSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';

export function fileUidAllocator(
  dataDir: string,
  range: { min: number; max: number },
): () => Promise<number> {
  const file = join(dataDir, 'uid-mark');
  let queue: Promise<unknown> = Promise.resolve();
  const next = async () => {
    const last = existsSync(file) ? Number(readFileSync(file, 'utf8').trim()) : range.min - 1;
    const uid = Math.max(last + 1, range.min);
    if (uid > range.max) {
      throw new Error(
        `the host's service uids (${range.min}-${range.max}) are used up: give it a larger --service-uid-range`,
      );
    }
    const tmp = `${file}.tmp`;
    const fd = openSync(tmp, 'w', 0o600);
    try {
      writeSync(fd, `${uid}\n`);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, file);
    return uid;
  };
  return () => {
    const run = queue.then(next, next);
    queue = run.catch(() => undefined);
    return run;
  };
}
