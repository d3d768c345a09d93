// Email addresses of users and of the administrator, as GET /v1/auth/info
// shows them. Clients parse them (`format: email`), some with a strict
// pattern, so Basin accepts only the form every one of them takes: a
// dot-atom local part, and a domain of at least two labels (no quoted local
// parts, no IP literals).

import { invalid } from './errors.js';

const LOCAL = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*";
const LABEL = '[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?';
const EMAIL = new RegExp(`^${LOCAL}@${LABEL}(?:\\.${LABEL})+$`);

/** The longest address SMTP carries (RFC 5321: a 256-octet path less its brackets). */
export const EMAIL_MAX = 254;

export function isEmail(text: string): boolean {
  return text.length <= EMAIL_MAX && text.indexOf('@') <= 64 && EMAIL.test(text);
}

/** `text` when it is an address clients accept, else a 400 that says what is wrong. */
export function checkEmail(text: string): string {
  if (!isEmail(text)) {
    throw invalid(
      `${JSON.stringify(text)} is not an email address Basin accepts: write it like alice@example.com (a domain with a dot, at most ${EMAIL_MAX} characters).`,
    );
  }
  return text;
}
