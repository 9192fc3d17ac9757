import type { Executor } from '../db/client.ts';
import type { Logger } from '../logger.ts';

/** What a handler receives about the job it runs. */
export interface Job<P = unknown> {
  /** The job row's id (cronq_jobs.id): the same on every attempt. */
  id: number;
  /** Its kind: the name of the task or schedule whose handler runs it. */
  kind: string;
  /** Its key, unique across all jobs (a schedule's: `<name>:<period key>`, or `<name>:<entity key>:<period key>` for a fan-out's). */
  key: string;
  /** The queue it was claimed from. */
  queue: string;
  /**
   * The stored payload read back from JSON (`{}` when it was enqueued without one), through
   * the task's `parse` when it has one: a payload that does not parse never reaches the handler.
   */
  payload: P;
  /** This delivery's attempt number, from 1. */
  attempt: number;
  /** Attempts it gets in all: when this attempt is the last and fails, it goes dead. */
  maxAttempts: number;
  /** The schedule period this job belongs to (null for ad-hoc jobs). */
  periodKey: string | null;
  /** The tick instant that enqueued it (null for ad-hoc jobs). */
  scheduledAt: Date | null;
}

/** A write that must commit together with "done", or not at all. */
export type Effect = (tx: Executor) => Promise<unknown>;

/** What a handler receives beside its job: the signal to stop on, a logger, and effects that commit with "done". */
export interface JobContext {
  /**
   * Aborts when the task's `timeout` passes (JobTimeoutError), the lease is lost
   * (LeaseLostError; JobCancelledError when an operator cancelled the job) or the shutdown
   * grace runs out (ShutdownAbortError): stop work and return.
   */
  signal: AbortSignal;
  /** A child logger carrying job_id and kind. */
  log: Logger;
  /**
   * Registers `fn(tx)` to run inside the fenced transaction that marks the job done.
   * Effects run in registration order; if any throws, nothing commits and the job
   * fails like a handler error. They never run when the lease was lost. Together they may
   * run for the task's `timeout`, counted from when the completion is sent (as the handler
   * returns), and at most until a third of the lease before it ends; past that their
   * transaction is abandoned and rolled back and the attempt fails with EffectTimeoutError.
   * A bound that ends before they began (waiting for a connection or the row lock) fails
   * nothing: the lease is renewed and the completion tried again (`job_effects_delayed`).
   * Called after the handler returned (outside a running effect), it registers nothing
   * and logs `job_effect_ignored`.
   */
  effect(fn: Effect): void;
}

/**
 * Internal, not exported from the package: a function on a run's ctx (not enumerable, so a
 * spread `{ ...ctx }` leaves it out) that cronq's own handlers call once the job's work is
 * done and only tidying is left (the command handler, once the shell exited 0 and its output
 * drains). A success such a handler returns after the shutdown's grace aborted its signal is
 * then recorded done, not handed back to run again: the work ran whole before the abort.
 */
export const WORK_DONE = Symbol('cronq.workDone');

/** What a ctx offers cronq's own handlers (WORK_DONE); absent on a ctx a wrapper rebuilt. */
export type WorkDoneMark = { readonly [WORK_DONE]?: () => void };

/** Runs one attempt of a job: returning (or resolving) is success, throwing is a failure (PermanentError: no retry). */
export type Handler<P = unknown> = (job: Job<P>, ctx: JobContext) => unknown | Promise<unknown>;
