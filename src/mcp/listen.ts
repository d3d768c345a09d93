// `basin mcp --http host:port`, read: a module of its own, so that checking
// the command line does not load the MCP SDK (http.ts).

/** `host:port` (IPv6 in brackets; port 0: any free one, printed), or a message saying what is wrong. */
export function parseListen(text: string): { host: string; port: number } | string {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(text);
  const port = Number(m?.[3]);
  if (!m || port > 65535) return `--http must be host:port (e.g. 127.0.0.1:8765); got ${text}.`;
  return { host: (m[1] ?? m[2]) as string, port };
}
