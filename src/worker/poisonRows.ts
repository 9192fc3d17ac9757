import type { Logger } from '../logger.ts';
import { DB_ERROR_TEXT_MAX, errorText } from '../runtime/errorText.ts';
import type { ClaimUpdateError, UnreadableRowsError } from '../store/index.ts';

/** Most rows remembered as unclaimable (beyond that, a refused row is narrowed down again each time). */
const MAX_UNCLAIMABLE = 1_000;
/** Most job ids one `job_unclaimable` line lists (`jobs` counts them all). */
const IDS_LOGGED = 20;

/**
 * Rows the database refuses to reserve (a claim's UPDATE failed with ClaimUpdateError,
 * not a connection problem). A refused claim is narrowed down: the next claims take one
 * row at a time until the row that fails is alone; that row is never claimed again in
 * this process (it stays 'ready' for a person to repair: see the `job_unclaimable`
 * line), while the other rows go on being claimed. Rows too large to read whose dead
 * letters were refused (UnreadableRowsError) are named by the claim itself: skipped at
 * once, with no narrowing.
 *
 * Bookkeeping for the claim loop only; no I/O.
 */
export class PoisonRows {
  private readonly unclaimable = new Set<number>();
  /** Claims left to make one row at a time while narrowing down a refused row. */
  private isolating = 0;

  constructor(private readonly log: Logger) {}

  /** Claims take one row at a time now. */
  get narrowing(): boolean {
    return this.isolating > 0;
  }

  /** A claim whose rows could not be reserved. */
  refused(error: ClaimUpdateError): void {
    if (error.ids.length > 1) {
      this.isolating = error.ids.length;
      return;
    }
    const [id] = error.ids;
    if (this.unclaimable.size < MAX_UNCLAIMABLE) this.unclaimable.add(id);
    this.log.error(
      { event: 'job_unclaimable', job_id: id, error: errorText(error.cause, DB_ERROR_TEXT_MAX) },
      'the database refuses to reserve this job; it is skipped until repaired (and this daemon restarted)',
    );
    this.isolating = 0;
  }

  /**
   * A claim found rows larger than max_allowed_packet and could not send them dead: they
   * are never claimed again in this process (they stay 'ready'), logged in one line.
   * False when some could not be remembered (MAX_UNCLAIMABLE): the next claims may meet
   * them again, so the caller should wait before claiming.
   */
  unreadable(error: UnreadableRowsError): boolean {
    for (const id of error.ids) if (this.unclaimable.size < MAX_UNCLAIMABLE) this.unclaimable.add(id);
    this.log.error(
      { event: 'job_unclaimable', job_ids: error.ids.slice(0, IDS_LOGGED), jobs: error.ids.length, error: errorText(error.cause, DB_ERROR_TEXT_MAX) },
      "these jobs are larger than the server's max_allowed_packet and their dead letters were refused; they are skipped until repaired (and this daemon restarted)",
    );
    return error.ids.every((id) => this.unclaimable.has(id));
  }

  /** A claim went through: one step of narrowing done. */
  claimed(): void {
    if (this.isolating > 0) this.isolating -= 1;
  }

  /** The rows never to claim again, plus `more`. */
  excluding(more: number[]): ReadonlySet<number> {
    return more.length === 0 ? this.unclaimable : new Set([...this.unclaimable, ...more]);
  }
}
