import { hostname, userInfo } from 'node:os';

/**
 * Who an operator action is recorded as when the caller names no one: `user@host` of
 * this process (the OS account; $USER, else 'unknown', when the uid has none, as in some
 * containers).
 */
export function defaultOperator(): string {
  let user = process.env.USER || 'unknown';
  try {
    user = userInfo().username || user;
  } catch {
    // No passwd entry for this uid: keep $USER or 'unknown'.
  }
  return `${user}@${hostname()}`;
}
