import { driverError } from '../db/client.ts';
import { maskUrl } from '../db/url.ts';

/**
 * True for errors that mean "retrying cannot help": cronq's PermanentError from any
 * copy of the package (checked by name, since a schedule file may load its own copy).
 */
export function isPermanent(error: unknown): boolean {
  return (error as { name?: string })?.name === 'PermanentError';
}

/**
 * The text stored in last_error and failure_reason: `Name: message`, with URL
 * passwords masked. Never the payload, never a stack (paths and values leak there), and
 * for a failed statement the driver's error, not drizzle's wrapper (SQL plus parameters).
 */
export function describeFailure(error: unknown): string {
  error = driverError(error);
  if (error instanceof Error) {
    const name = error.name && error.name !== 'Error' ? `${error.name}: ` : 'Error: ';
    return maskUrl(`${name}${error.message}`);
  }
  return maskUrl(`non-error thrown: ${String(error)}`);
}
