/**
 * A command's output: every line logged at debug level (URL passwords masked), the tail of
 * stderr kept for the failure text. Memory per attempt is bounded (a partial line and the
 * tail), and every byte is looked at a bounded number of times.
 */
import type { ChildProcess } from 'node:child_process';
import { StringDecoder } from 'node:string_decoder';
import { maskUrl } from '../db/url.ts';
import type { Logger } from '../logger.ts';

/** How much of the end of stderr a failure keeps (it becomes the job's last_error). */
export const STDERR_TAIL_BYTES = 4_096;

/**
 * Most characters of the stderr tail a failure's error shows: its last ones, so that the
 * whole error (`Error: command exited with code N: …tail`) fits in `last_error` and the
 * dead letter (ERROR_TEXT_MAX, 2,000), which keep an error's start. A longer tail there
 * would lose its end, where a failing command says why.
 */
export const STDERR_SHOWN_CHARS = 1_900;

/** Longer output lines are logged in pieces of this many characters, so a line never buffers unboundedly. */
const MAX_LINE_CHARS = 8_192;

export interface Output {
  /** Resolves when both pipes have closed (every writer, background children included, is done). */
  closed: Promise<void>;
  /** Flushes partial lines, then keeps the pipes drained without logging and lets them not hold the event loop. */
  detach(): void;
  /** stderr's tail as a failure shows it: its last STDERR_SHOWN_CHARS characters at most. */
  stderrTail(): string;
}

/** Logs stdout and stderr line by line at debug level and keeps stderr's tail. */
export function watchOutput(child: ChildProcess, log: Logger): Output {
  const tail = new ByteTail(STDERR_TAIL_BYTES);
  // Lines are at most MAX_LINE_CHARS, so masking them is cheap; skipped when debug is off.
  const emit = (stream: 'stdout' | 'stderr') => (line: string) => {
    if (log.isLevelEnabled('debug')) log.debug({ event: 'command_output', stream, line: maskUrl(line) }, 'command output');
  };
  const stdout = new LineSplitter(emit('stdout'));
  const stderr = new LineSplitter(emit('stderr'));
  const onStdout = (chunk: Buffer) => stdout.write(chunk);
  const onStderr = (chunk: Buffer) => {
    tail.push(chunk);
    stderr.write(chunk);
  };
  child.stdout?.on('data', onStdout);
  child.stderr?.on('data', onStderr);
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  let detached = false;
  return {
    closed,
    detach() {
      if (detached) return;
      detached = true;
      stdout.end();
      stderr.end();
      for (const [pipe, listener] of [
        [child.stdout, onStdout],
        [child.stderr, onStderr],
      ] as const) {
        if (!pipe) continue;
        pipe.off('data', listener);
        // Destroying the pipe would SIGPIPE a process the command left running; discard instead.
        pipe.resume();
        (pipe as unknown as { unref?: () => void }).unref?.();
      }
    },
    stderrTail: () => tail.text(STDERR_SHOWN_CHARS),
  };
}

/** How far back from a piece's full length its cut looks for a space (pieceEnd). */
const CUT_LOOKBACK_CHARS = 1_024;

/**
 * Where the piece of `line` from `at` ends: after the last whitespace within
 * CUT_LOOKBACK_CHARS of MAX_LINE_CHARS, so a word (a URL whose password maskUrl must see
 * whole) up to that long is never split between two logged pieces; else at
 * MAX_LINE_CHARS, moved back one so as not to split a surrogate pair. Looks at no more
 * than CUT_LOOKBACK_CHARS characters per piece, so splitting stays linear.
 */
function pieceEnd(line: string, at: number): number {
  const full = at + MAX_LINE_CHARS;
  for (let i = full - 1; i >= full - CUT_LOOKBACK_CHARS; i--) {
    const c = line.charCodeAt(i);
    if (c === 0x20 || c === 0x09) return i + 1;
  }
  const high = line.charCodeAt(full - 1);
  return high >= 0xd800 && high <= 0xdbff ? full - 1 : full;
}

/** Splits a byte stream into UTF-8 lines; a line longer than MAX_LINE_CHARS comes out in pieces. */
class LineSplitter {
  private readonly decoder = new StringDecoder('utf8');
  private pending = '';

  constructor(private readonly emit: (line: string) => void) {}

  write(chunk: Buffer): void {
    const text = this.pending + this.decoder.write(chunk);
    // One pass over the text: each line is cut once, and the remainder kept once.
    let from = 0;
    for (let newline = text.indexOf('\n'); newline !== -1; newline = text.indexOf('\n', from)) {
      this.emitPieces(text.slice(from, newline), true);
      from = newline + 1;
    }
    this.pending = this.emitPieces(text.slice(from), false);
  }

  /** Emits `line` in pieces of at most MAX_LINE_CHARS (pieceEnd); unless `whole`, returns the last short piece instead of emitting it. */
  private emitPieces(line: string, whole: boolean): string {
    let at = 0;
    while (line.length - at > MAX_LINE_CHARS) {
      const end = pieceEnd(line, at);
      this.emit(line.slice(at, end));
      at = end;
    }
    const last = line.slice(at);
    if (!whole) return last;
    this.emitLine(last);
    return '';
  }

  end(): void {
    this.pending += this.decoder.end();
    if (this.pending !== '') this.emitLine(this.pending);
    this.pending = '';
  }

  private emitLine(line: string): void {
    this.emit(line.endsWith('\r') ? line.slice(0, -1) : line);
  }
}

/** The last `limit` bytes of a stream, held in at most about twice that. */
class ByteTail {
  private chunks: Buffer[] = [];
  private size = 0;
  private truncated = false;

  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    if (this.size > 2 * this.limit) this.compact();
  }

  /** The tail as trimmed text (its last `maxChars` characters at most), starting with `…` when earlier output was dropped. */
  text(maxChars = Infinity): string {
    this.compact();
    let bytes = this.chunks[0] ?? Buffer.alloc(0);
    // The cut may land inside a UTF-8 character: skip its continuation bytes rather than show U+FFFD.
    let start = 0;
    if (this.truncated) while (start < bytes.length && (bytes[start] & 0xc0) === 0x80) start++;
    bytes = bytes.subarray(start);
    let text = bytes.toString('utf8').trim();
    let truncated = this.truncated;
    if (text.length > maxChars - 1) {
      const from = text.length - (maxChars - 1);
      const first = text.charCodeAt(from);
      text = text.slice(first >= 0xdc00 && first <= 0xdfff ? from + 1 : from); // never half a surrogate pair
      truncated = true;
    }
    return truncated && text !== '' ? `…${text}` : text;
  }

  private compact(): void {
    const all = Buffer.concat(this.chunks);
    if (all.length > this.limit) this.truncated = true;
    // A copy, so the (possibly 64 KiB) chunk the tail was cut from can be collected.
    const kept = Buffer.from(all.subarray(Math.max(0, all.length - this.limit)));
    this.chunks = [kept];
    this.size = kept.length;
  }
}

