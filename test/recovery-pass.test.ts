import { describe, expect, it } from 'vitest';
import { recoverOnce } from '../src/maintenance/recovery.ts';
import { noopObserver } from '../src/observe.ts';
import { DbHealth } from '../src/runtime/dbHealth.ts';
import { EventLog } from './support/events.ts';

describe('a recovery pass', () => {
  it('reports the leases its committed batches recovered when a later batch fails, then fails', async () => {
    const log = new EventLog();
    const told: Array<[number, number]> = [];
    const lost = Object.assign(new Error('Connection lost: The server closed the connection.'), { code: 'PROTOCOL_CONNECTION_LOST' });
    const answers = [{ returned: 100, dead: 0 }, { returned: 98, dead: 2 }];
    const store = {
      recoverExpiredLeases: async () => {
        const next = answers.shift();
        if (!next) throw lost;
        return next;
      },
    };
    await expect(
      recoverOnce({
        store,
        log: log.logger,
        health: new DbHealth(log.logger),
        everyMs: 1_000,
        batchSize: 100,
        maxBatchesPerPass: 20,
        observer: { ...noopObserver, leasesRecovered: (returned, dead) => void told.push([returned, dead]) },
      }),
    ).rejects.toBe(lost);
    expect(log.named('leases_recovered').map((e) => [e.returned, e.dead])).toEqual([[198, 2]]);
    expect(told).toEqual([[198, 2]]);
  });
});
