/** C0 controls but tab and newline, DEL, and C1 controls: what a terminal may act on instead of showing. */
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;

/**
 * `text` with every control character a terminal would act on (ESC sequences that clear
 * the screen, move the cursor over earlier lines, set the title; a carriage return that
 * overwrites its line) written as a visible escape, `\x1b`: keys, kinds and failure
 * reasons come from jobs and handlers, and must read as they are stored. Tabs and line
 * breaks stay. Linear in the text's length; JSON output never holds such characters.
 */
export function printable(text: string): string {
  return text.replace(CONTROL, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}
