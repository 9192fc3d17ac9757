import { hostname, userInfo } from 'node:os';

/**
 * Who an operator action is recorded as when the caller names no one: `user@host` of
 * this process (the OS account, or 'unknown' when it has none, as in some containers).
 */
export function defaultOperator(): string {
  let user = 'unknown';
  try {
    user = userInfo().username || user;
  } catch {
    // No passwd entry for this uid: keep 'unknown'.
  }
  return `${user}@${hostname()}`;
}
