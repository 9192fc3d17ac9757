/**
 * Rows a claim locked but cannot read: the locking read's `CAST(payload AS CHAR)` came
 * back NULL. The server does that, with warning 1301, for a result larger than the
 * session's max_allowed_packet: a row written before an operator lowered it, or by a
 * client whose packets may be larger. No handler can ever be given such a row, and left
 * 'ready', every claim that picks it would pick it again. The claim sends it dead instead
 * (sendUnreadableDead), its attempts as they were (it never ran), with a dead letter
 * saying how large a max_allowed_packet it needs; the claim's other rows are claimed as
 * usual.
 *
 * Concurrency contract: runs inside the claim's transaction, on its connection, with the
 * rows still locked by its locking read (and 'ready' under that lock), before the
 * reserving UPDATE; it commits nothing (the claim's COMMIT does, or its rollback undoes
 * it all). The sizes are read on that same session, so `@@max_allowed_packet` is the
 * value the read was refused by (a session keeps the global value of when it connected).
 */
import { ERROR_TEXT_MAX, boundedText } from '../runtime/errorText.ts';
import { reasonGroup } from './failureReason.ts';
import { format, idsCondition, NO_TIME_RAW, PAYLOAD_KEPT_RAW } from './sql.ts';

/** Sends statements as one packet within the claim's transaction; returns each one's result. */
export type SendStatements = (statements: string[]) => Promise<unknown[]>;

/** Most job ids an UnreadableRowsError names in its message (the rest are counted). */
const IDS_SHOWN = 10;

const MIB = 1024 * 1024;

/**
 * A claim locked rows it could not read (their payload larger than max_allowed_packet)
 * and could not send them dead either (their dead letters refused: the table missing, a
 * trigger). The claim was rolled back whole: every row it locked is still 'ready'. `ids`
 * are the unreadable rows, so a caller can stop claiming them; the claim's other rows
 * can be claimed again at once.
 */
export class UnreadableRowsError extends Error {
  override name = 'UnreadableRowsError';
  constructor(
    readonly ids: number[],
    cause: unknown,
  ) {
    const shown = ids.slice(0, IDS_SHOWN).join(', ') + (ids.length > IDS_SHOWN ? ` and ${ids.length - IDS_SHOWN} more` : '');
    super(`jobs ${shown} are larger than the server's max_allowed_packet, and sending them dead failed`, { cause });
  }
}

/**
 * Why an unreadable row went dead: its payload is `bytes` bytes, the session's
 * max_allowed_packet `maxPacket`. At most ERROR_TEXT_MAX characters.
 */
export function unreadableReason(bytes: number | null, maxPacket: number): string {
  if (bytes === null || bytes <= maxPacket) {
    // Not a size the server refuses: say what happened, not a cause it does not have.
    return boundedText(
      `the server returned no payload for this row (its payload is ${bytes ?? 'unknown'} bytes, max_allowed_packet ${maxPacket} bytes); repair the row, then requeue it`,
      ERROR_TEXT_MAX,
    );
  }
  // A payload of exactly max_allowed_packet bytes reads; a whole number of MiB is what people set.
  const needed = Math.ceil(bytes / MIB) * MIB;
  return boundedText(
    `row is larger than the server's max_allowed_packet (${maxPacket} bytes): its payload is ${bytes} bytes; ` +
      `raise max_allowed_packet to at least ${needed} bytes (${needed / MIB}M), then requeue it`,
    ERROR_TEXT_MAX,
  );
}

/**
 * Sends the rows of `ids` dead (see the module comment): one packet reading each one's
 * payload size, then one writing, per row, 'dead' with its reason in `last_error`
 * (attempts unchanged) and its dead letter (the row's own payload, copied by the server;
 * its reason group computed here). Throws whatever the server refused; the caller rolls
 * the claim back.
 */
export async function sendUnreadableDead(send: SendStatements, ids: readonly number[]): Promise<void> {
  if (ids.length === 0) return;
  const [found] = await send([
    `SELECT id, LENGTH(payload) AS bytes, @@SESSION.max_allowed_packet AS max_packet FROM cronq_jobs WHERE ${idsCondition(ids)}`,
  ]);
  const writes: string[] = [];
  for (const row of found as Array<{ id: number; bytes: number | null; max_packet: number }>) {
    const reason = unreadableReason(row.bytes === null ? null : Number(row.bytes), Number(row.max_packet));
    writes.push(
      format(
        `${PAYLOAD_KEPT_RAW}UPDATE cronq_jobs
        SET status = 'dead', lease_deadline = ?, last_error = ?, finished_time = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6)
        WHERE id = ?`,
        [NO_TIME_RAW, reason, Number(row.id)],
      ),
      format(
        `${PAYLOAD_KEPT_RAW}INSERT INTO cronq_dead_letters
          (job_id, queue, kind, job_key, payload, failure_reason, attempts, dead_at, reason_group)
        SELECT id, queue, kind, job_key, payload, last_error, attempts, UTC_TIMESTAMP(6), ? FROM cronq_jobs WHERE id = ?`,
        [reasonGroup(reason), Number(row.id)],
      ),
    );
  }
  if (writes.length > 0) await send(writes);
}
