// Who is signed in: the API key, kept in sessionStorage only (this tab, until
// it closes; never localStorage, never a cookie: docs/security.md, The
// console), and the project it belongs to. Every call to Basin goes through
// basin/client, the same client scripts use.
import { BasinError, type BasinClient, createBasinClient } from '../../src/client/index.js';

const STORAGE_KEY = 'basin.apiKey';

export interface Session {
  client: BasinClient;
  projectId: string;
  projectName: string;
  /** The credential's name, shown in the header. */
  credential: string;
}

/** Checks the key with Basin (GET /v1/auth/info) and, if it is good, keeps it for this tab. */
export async function signIn(apiKey: string): Promise<Session> {
  const client = createBasinClient({ url: location.origin, apiKey: apiKey.trim() });
  const info = await client.GET('/v1/auth/info');
  if (!info.api_key) {
    throw new BasinError('UNAUTHORIZED', 'The console signs in with a project API key (bsn_…).');
  }
  sessionStorage.setItem(STORAGE_KEY, apiKey.trim());
  return {
    client,
    projectId: info.api_key.project.id,
    projectName: info.api_key.project.name,
    credential: info.api_key.name,
  };
}

/** The key this tab signed in with, if any. */
export function storedKey(): string | null {
  return sessionStorage.getItem(STORAGE_KEY);
}

export function forgetKey(): void {
  sessionStorage.removeItem(STORAGE_KEY);
}

/** `CODE: message`, as Basin (or the client) said it. */
export function describeError(err: unknown): { code: string; message: string } {
  if (err instanceof BasinError) return { code: err.code, message: err.message };
  return { code: 'ERROR', message: err instanceof Error ? err.message : String(err) };
}
