/**
 * How `cronq dead` prints dead letters: readable text for people, plain JSON objects
 * for scripts. Every time is ISO 8601 UTC.
 */
import type { DeadLetterDetail, DeadLetterGroup, DeadLetterSummary } from '../admin.ts';
import { renderTable } from './textTable.ts';
import { instantText, unreadablePayloadNote } from '../shownText.ts';

const iso = (date: Date | null): string => (date === null ? '' : instantText(date));

/** The table `dead list` prints: oldest first, one line each (the reason's first line). */
export function deadLetterTable(letters: DeadLetterSummary[], { withResolution = false } = {}): string {
  return renderTable(
    [
      { header: 'ID', align: 'right' },
      { header: 'DEAD AT' },
      { header: 'KIND', maxWidth: 40 },
      { header: 'KEY', maxWidth: 60 },
      { header: 'ATTEMPTS', align: 'right' },
      ...(withResolution ? [{ header: 'RESOLUTION', maxWidth: 40 }] : []),
      // One row each: the reason's first line (at most LISTED_REASON_MAX characters) cut to a terminal's few lines.
      { header: 'REASON', maxWidth: 300 },
    ],
    letters.map((l) => [
      String(l.id),
      iso(l.deadAt),
      l.kind,
      l.key,
      String(l.attempts),
      ...(withResolution ? [l.resolution ?? '(unreviewed)'] : []),
      l.reason,
    ]),
  );
}

/** The table `dead list --group` prints: largest group first. */
export function deadLetterGroupTable(groups: DeadLetterGroup[]): string {
  return renderTable(
    [
      { header: 'COUNT', align: 'right' },
      { header: 'KIND', maxWidth: 40 },
      { header: 'FIRST DEAD AT' },
      { header: 'LAST DEAD AT' },
      { header: 'EXAMPLE', align: 'right' },
      { header: 'REASON' },
    ],
    groups.map((g) => [String(g.count), g.kind, iso(g.firstDeadAt), iso(g.lastDeadAt), String(g.exampleId), g.reason]),
  );
}

/** A dead letter as JSON: the summary fields, times as ISO strings. */
export function deadLetterJson(letter: DeadLetterSummary): Record<string, unknown> {
  return { ...letter, deadAt: iso(letter.deadAt), reviewedAt: letter.reviewedAt && iso(letter.reviewedAt) };
}

/** `dead show --json`: everything, the payload parsed (or as text if it does not parse). */
export function deadLetterDetailJson(letter: DeadLetterDetail): Record<string, unknown> {
  const { payloadText, payloadChars, job, ...rest } = letter;
  return {
    ...deadLetterJson(rest),
    failureReason: letter.failureReason,
    payload: payloadText === null ? null : parseOr(payloadText),
    payloadBytes: letter.payloadBytes,
    ...(payloadText === null && { payloadUnreadable: true }),
    job: job && { ...job, availableAt: iso(job.availableAt), updatedAt: iso(job.updatedAt) },
  };
}

/** `dead show`: every field, the payload pretty-printed, the whole failure reason. */
export function deadLetterDetailText(letter: DeadLetterDetail): string {
  const job = letter.job
    ? `${letter.job.id} (now ${letter.job.status}, attempts ${letter.job.attempts}/${letter.job.maxAttempts}, available at ${iso(letter.job.availableAt)})`
    : `${letter.jobId} (the job row no longer exists)`;
  const reviewed = letter.reviewedAt ? `${iso(letter.reviewedAt)} (${letter.resolution ?? 'no resolution recorded'})` : 'no';
  return [
    `dead letter ${letter.id}`,
    `  job:       ${job}`,
    `  queue:     ${letter.queue}`,
    `  kind:      ${letter.kind}`,
    `  key:       ${letter.key}`,
    `  attempts:  ${letter.attempts}`,
    `  dead at:   ${iso(letter.deadAt)}`,
    `  reviewed:  ${reviewed}`,
    `  payload:`,
    indent(letter.payloadText === null ? unreadablePayloadNote(letter.payloadBytes) : prettyJson(letter.payloadText)),
    `  failure reason:`,
    indent(letter.failureReason),
  ].join('\n');
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((line) => `    ${line}`.trimEnd())
    .join('\n');
}

function prettyJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

function parseOr(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
