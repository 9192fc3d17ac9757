/**
 * A job's or dead letter's payload as a page shows it (to token holders): at most
 * PAYLOAD_SHOWN_MAX characters of it, with a note saying how much more it holds. A
 * payload may be megabytes (enqueue takes up to 64 MiB, the server returns up to its
 * max_allowed_packet): escaped and copied into the page whole, one 15 MB payload of `&`
 * made a 75 MB page and took the daemon's memory from 100 MB to 600 MB per view. A page
 * reads only PAYLOAD_SHOWN_MAX characters of it from the database (admin.job's and
 * deadLetters.get's payloadCharsMax), so such a payload is not even fetched whole, and
 * for a viewer without the token, who is not shown it, none of it (`payload: false`).
 */
import type { PayloadReadOptions } from '../../admin.ts';
import { sliceChars } from '../../runtime/errorText.ts';
import { unreadablePayloadNote } from '../../shownText.ts';
import { html, type Html } from './html.ts';
import type { Viewer } from './layout.ts';

/** Characters (UTF-16 units, never half a pair) of a payload a page shows. */
export const PAYLOAD_SHOWN_MAX = 64 * 1024;

/** A payload as read: its text (whole, or its first PAYLOAD_SHOWN_MAX characters or more), and the whole's size. */
export interface PayloadRead {
  payloadText: string | null;
  payloadBytes: number;
  /** The whole payload's length in code points, when the read may have been cut (a bounded read); absent when the text is whole. */
  payloadChars?: number;
}

/**
 * The payload's `<pre>` (its start when longer than PAYLOAD_SHOWN_MAX, then a note naming
 * `whole`, where to read all of it), or the note for one the server would not return.
 * A bounded read must have asked for PAYLOAD_SHOWN_MAX characters at least: the text is
 * cut then exactly when the whole has more code points than that.
 */
export function payloadBlock({ payloadText: text, payloadBytes: bytes, payloadChars }: PayloadRead, whole: string): Html {
  if (text === null) return html`<pre id="payload">${unreadablePayloadNote(bytes)}</pre>`;
  // UTF-16 units are never fewer than code points: a whole text of more than PAYLOAD_SHOWN_MAX code points is cut here too.
  if (text.length <= PAYLOAD_SHOWN_MAX && (payloadChars ?? 0) <= PAYLOAD_SHOWN_MAX) return html`<pre id="payload">${text}</pre>`;
  const shown = sliceChars(text, PAYLOAD_SHOWN_MAX);
  return html`<pre id="payload">${shown}</pre><p class="note">Only its first ${shown.length} characters are shown: the payload holds ${bytes} bytes (read it whole with <code>${whole}</code>).</p>`;
}

/** What a page reads of a payload for `viewer`: the start it shows a token holder; none of it, nor its size, for anyone else. */
export function payloadReadFor(viewer: Viewer): PayloadReadOptions {
  return viewer.operator ? { payloadCharsMax: PAYLOAD_SHOWN_MAX } : { payload: false };
}

/**
 * A page's payload section for `viewer`: payloadBlock of `row` (read with payloadReadFor)
 * for a token holder, else the note that payloads are shown to token holders only.
 */
export function payloadSection(viewer: Viewer, row: PayloadRead | object, whole: string): Html {
  return viewer.operator && 'payloadText' in row ? payloadBlock(row, whole) : html`<p class="note">Payloads are shown to token holders only.</p>`;
}
