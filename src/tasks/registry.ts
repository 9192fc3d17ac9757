import { UsageError } from '../errors.ts';
import type { Task } from './define.ts';

/**
 * The tasks a process knows, by kind (schedules among them: see schedulesOf in
 * schedule/define.ts). Names are unique; the second registration of one is refused.
 * A kind with a cluster-wide `concurrency` limit has its queue to itself (a claim from
 * that queue then only ever picks that kind): a second kind in it is refused too.
 */
export class TaskRegistry {
  private readonly byName = new Map<string, { task: Task; source: string }>();

  constructor(tasks: Task[] = []) {
    for (const task of tasks) this.add(task, 'createCronq({ tasks })');
  }

  /** Adds a task; throws UsageError naming both sources (one, when the same) when the name is taken. */
  add(task: Task, source: string): void {
    const existing = this.byName.get(task.name);
    if (existing) {
      const where = existing.source === source ? `twice in ${source}` : `in ${existing.source} and in ${source}`;
      throw new UsageError(`duplicate name '${task.name}': defined ${where}`);
    }
    const sharing = [...this.byName.values()].find(
      (e) => e.task.queue === task.queue && (e.task.concurrency !== null || task.concurrency !== null),
    );
    if (sharing) {
      const limited = task.concurrency !== null ? task : sharing.task;
      throw new UsageError(
        `'${task.name}' (${source}) and '${sharing.task.name}' (${sharing.source}) share queue '${task.queue}', but '${limited.name}' has a concurrency limit and needs a queue of its own`,
      );
    }
    this.byName.set(task.name, { task, source });
  }

  /** Each name with where it was defined (the source given to add). */
  sources(): Array<{ name: string; source: string }> {
    return [...this.byName.entries()].map(([name, e]) => ({ name, source: e.source }));
  }

  get(kind: string): Task | undefined {
    return this.byName.get(kind)?.task;
  }

  list(): Task[] {
    return [...this.byName.values()].map((e) => e.task);
  }

  get size(): number {
    return this.byName.size;
  }
}
