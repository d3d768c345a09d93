// Where a PostgreSQL store is, for messages: a module of its own so that
// naming the store (the `basin` command's errors) does not load `pg`.

/** host:port/database, never the password. */
export function describe(url: string): string {
  try {
    const u = new URL(url);
    const host = u.hostname || u.searchParams.get('host') || 'localhost';
    return `${host}:${u.port || '5432'}${u.pathname}`;
  } catch {
    return 'an unreadable URL';
  }
}
