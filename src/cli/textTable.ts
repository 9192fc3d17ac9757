import { sliceChars } from '../runtime/errorText.ts';
import { printable } from './printable.ts';

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
 * no trailing spaces. Line breaks and tabs inside a cell become spaces, so every row
 * stays one line, and other control characters visible escapes (see printable). Returns the lines without a final newline.
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
  const flat = printable(text.replace(/[\r\n\t]+/g, ' '));
  return maxWidth !== undefined && flat.length > maxWidth ? `${sliceChars(flat, Math.max(0, maxWidth - 1))}…` : flat;
}
