import { sliceChars } from '../runtime/errorText.ts';
import { printableLine } from './printable.ts';

/** One column of a text table. */
export interface Column {
  header: string;
  /** Numbers read best right-aligned (default left). */
  align?: 'left' | 'right';
  /** Longer cells are cut with '…' (default: no limit). */
  maxWidth?: number;
}

/**
 * Renders `rows` under `columns` as aligned plain text, two spaces between columns,
 * no trailing spaces. Every control character of a cell, line breaks and tabs included,
 * is a visible escape (`\x0a`, `\x09`: see printableLine), so every row stays one line and
 * `a\t` never reads as `a `. Returns the lines without a final newline.
 */
export function renderTable(columns: Column[], rows: string[][]): string {
  const cells = [columns.map((c) => c.header), ...rows.map((row) => columns.map((c, i) => cell(row[i] ?? '', c.maxWidth)))];
  const widths = columns.map((_, i) => Math.max(...cells.map((r) => r[i].length)));
  return cells
    .map((r) =>
      r
        .map((text, i) => (columns[i].align === 'right' ? text.padStart(widths[i]) : text.padEnd(widths[i])))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

function cell(text: string, maxWidth: number | undefined): string {
  const flat = printableLine(text);
  return maxWidth !== undefined && flat.length > maxWidth ? `${sliceChars(flat, Math.max(0, maxWidth - 1))}…` : flat;
}
