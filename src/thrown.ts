/**
 * One readable line for whatever was thrown, in bounded size and linear time, that
 * never throws itself: an Error's first message line, else `threw a non-Error value: `
 * and the value as JSON (`{"weird":true}`), or as String() when JSON cannot hold it.
 * An Error whose message getter throws, or a value whose toString throws
 * (`Object.create(null)`), still gets a line.
 */
export function thrownText(value: unknown, maxChars = 300): string {
  if (value instanceof Error) {
    const message = attempt(() => String(value.message)) ?? '';
    return bounded(message.trim() === '' ? (attempt(() => String(value.name)) ?? 'Error') : message, maxChars);
  }
  const shown = attempt(() => JSON.stringify(value)) ?? attempt(() => String(value)) ?? attempt(() => Object.prototype.toString.call(value)) ?? 'an unprintable value';
  return bounded(`threw a non-Error value: ${shown}`, maxChars);
}

function attempt(show: () => string | undefined): string | undefined {
  try {
    return show();
  } catch {
    return undefined;
  }
}

/** The first line of `text`, cut to `maxChars` (the cut marked with …). */
function bounded(text: string, maxChars: number): string {
  const end = text.indexOf('\n');
  const line = (end === -1 ? text : text.slice(0, end)).trimEnd();
  return line.length > maxChars ? `${line.slice(0, maxChars - 1)}…` : line;
}
