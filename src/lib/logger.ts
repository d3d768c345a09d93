// The logger interface Basin code uses: Fastify's pino logger fits it, and
// tests pass a silent one. Never log secrets: keys, passwords, verifiers.

export interface Logger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

export const silentLogger: Logger = {
  info() {},
  warn() {},
  error() {},
  debug() {},
};
