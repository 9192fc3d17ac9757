/**
 * True for errors that mean "retrying cannot help": cronq's PermanentError from any
 * copy of the package (checked by name, since a schedule file may load its own copy).
 * Never throws, whatever was thrown (a Proxy, a throwing getter).
 */
export function isPermanent(error: unknown): boolean {
  try {
    return (error as { name?: string })?.name === 'PermanentError';
  } catch {
    return false;
  }
}
