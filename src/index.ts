/**
 * cronq's public API: what schedule files and applications import from 'cronq'.
 */
export { createCronq, type Cronq, type CronqHealth, type CronqOptions, type EnqueueJob, type EnqueueOptions, type LoadedTasks, type StopResult, type TaskJob } from './cronq.ts';
export type {
  BulkCancelResult,
  AdminStats,
  Completions,
  DaemonSeen,
  JobRecord,
  JobTarget,
  BulkReviewResult,
  CancelFilter,
  CancelOptions,
  CancelOutcome,
  CancelTarget,
  CronqAdmin,
  ConsoleSignOutAdmin,
  BulkTriageOptions,
  DeadLetterAdmin,
  DeadLetterDetail,
  DeadLetterFilter,
  DeadLetterGroup,
  DeadLetterQuery,
  DeadLetterStats,
  DeadLetterSummary,
  KindLimitStatus,
  NoPayload,
  Pause,
  PauseAdmin,
  PauseOptions,
  PauseOutcome,
  PauseTarget,
  PayloadBound,
  PayloadFields,
  PayloadReadOptions,
  PruneResult,
  ResumeOutcome,
  QueueStats,
  QueuesMostBehind,
  ReviewAction,
  ReviewOutcome,
  ScheduleHealth,
  ScheduleListing,
  ScheduleStats,
  SessionStanding,
  Stats,
  TickNowOutcome,
  TickRow,
  UnknownStatusStats,
  WithoutPayload,
} from './admin.ts';
export { noopObserver, type Observer } from './observe.ts';
export { defineTask, type Task, type TaskOptions, type TaskVariantOptions } from './tasks/define.ts';
export {
  defineSchedule,
  type Schedule,
  type ScheduleOptions,
  type ScheduleFromTaskOptions,
  type Overlap,
  type CatchUpOptions,
  type CatchUpMode,
  type ResolvedCatchUp,
  type FanOut,
  type FanOutItem,
  type TickInfo,
} from './schedule/define.ts';
export type { Clock } from './schedule/clock.ts';
export type { Duration } from './duration.ts';
export type { Logger } from './logger.ts';
export type { Backoff } from './runtime/backoff.ts';
export type { Period } from './schedule/period.ts';
export type { Job, JobContext, Handler, Effect } from './tasks/job.ts';
export type { Executor } from './db/client.ts';
export {
  DatabaseBusyError,
  DatabaseMissingError,
  DatabaseUnreachableError,
  EnqueueError,
  EnqueueRefusedError,
  EffectTimeoutError,
  JobTimeoutError,
  LeaseLostError,
  JobCancelledError,
  MigrationNotBegunError,
  PermanentError,
  ScheduleFileError,
  SchemaBehindError,
  ShutdownAbortError,
  TickFanoutError,
  UsageError,
  type RefusedJobInfo,
} from './errors.ts';
