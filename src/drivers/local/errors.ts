// Errors of the local driver that are not DriverErrors (those come from ../driver.ts).

/** The host cannot run the local driver; the message says what is missing and how to fix it. */
export class HostCheckError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HostCheckError';
  }
}
