import { UsageError } from '../errors.ts';
import { shownInLine } from '../shownText.ts';

/** What Node puts in argv for bytes that are not UTF-8: U+FFFD, the replacement character. */
const REPLACEMENT = '\uFFFD';

/** One argument as parseArgs read it: a flag's value, or a positional argument. */
type ArgToken = { kind: 'option'; name: string; value?: string } | { kind: 'positional'; value: string } | { kind: 'option-terminator' };

/**
 * Refuses (UsageError naming the flag, or the argument and its place) a value holding
 * U+FFFD: Node reads argv as UTF-8 and puts U+FFFD for bytes that are not (a Latin-1
 * `é`), so the text would be stored changed, a key no longer the key the caller has, a
 * reason unreadable. (A U+FFFD typed as such cannot be told apart, and is refused too.)
 */
export function refuseUnreadableText(tokens: readonly ArgToken[]): void {
  let place = 0;
  for (const token of tokens) {
    if (token.kind === 'option-terminator') continue;
    if (token.kind === 'positional') place++;
    if (!token.value?.includes(REPLACEMENT)) continue;
    const what = token.kind === 'option' ? `--${token.name}` : `argument ${place} ('${shownInLine(token.value)}')`;
    throw new UsageError(`${what} holds U+FFFD, what bytes that are not UTF-8 become on a command line: it would be stored changed; pass it as UTF-8 text`);
  }
}
