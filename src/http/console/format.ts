/** How the console prints times and durations: UTC instants and short ages. */
import { INVALID_TIME_TEXT } from '../../shownText.ts';

/** An instant as `YYYY-MM-DD HH:MM:SS` UTC, '—' for none, INVALID_TIME_TEXT for a zero date stored by hand. */
export function when(date: Date | null | undefined): string {
  if (!date) return '—';
  return Number.isNaN(date.getTime()) ? INVALID_TIME_TEXT : date.toISOString().slice(0, 19).replace('T', ' ');
}

/** A duration in seconds as `45s`, `12m`, `3h`, `2d`; '—' for null. */
export function age(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return '—';
  if (seconds < 60) return `${Math.round(seconds)}s`;
  if (seconds < 3600) return `${Math.round(seconds / 60)}m`;
  if (seconds < 86_400) return `${Math.round(seconds / 3600)}h`;
  return `${Math.round(seconds / 86_400)}d`;
}

/** A count as digits, with `+` when counting stopped at its cap (there are at least that many). */
export function atLeast(count: number, capped: boolean): string {
  return `${count}${capped ? '+' : ''}`;
}
