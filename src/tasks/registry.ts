import { UsageError } from '../errors.ts';
import type { Task } from './define.ts';

/**
 * The tasks a process knows, by kind (schedules among them: see schedulesOf in
 * schedule/define.ts). Names are unique; the second registration of one is refused.
 */
export class TaskRegistry {
  private readonly byName = new Map<string, { task: Task; source: string }>();

  constructor(tasks: Task[] = []) {
    for (const task of tasks) this.add(task, 'createCronq({ tasks })');
  }

  /** Adds a task; throws UsageError naming both sources when the name is taken. */
  add(task: Task, source: string): void {
    const existing = this.byName.get(task.name);
    if (existing) {
      throw new UsageError(`duplicate name '${task.name}': defined in ${existing.source} and in ${source}`);
    }
    this.byName.set(task.name, { task, source });
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
