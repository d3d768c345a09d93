import type Database from 'better-sqlite3';

/**
 * A repository's statements, prepared once per connection and SQL text
 * rather than at every call: SQLite parses and plans a statement at each
 * prepare, and the engine claims (a query with a window function) every
 * second even when there is nothing to do. For one repository's own use:
 * each of its texts is always run in the same mode (`.pluck()` or not),
 * which a statement keeps.
 */
export function preparedOnce(db: Database.Database): (sql: string) => Database.Statement {
  const statements = new Map<string, Database.Statement>();
  return (sql) => {
    let statement = statements.get(sql);
    if (statement === undefined) {
      statement = db.prepare(sql);
      statements.set(sql, statement);
    }
    return statement;
  };
}
