import { describe, expect, it } from 'vitest';
import { DbHealth } from '../src/runtime/dbHealth.ts';
import { EventLog } from './support/events.ts';

const lost = () => Object.assign(new Error('connect ETIMEDOUT'), { code: 'ETIMEDOUT', fatal: true });

describe('DbHealth', () => {
  it('a statement sent during an outage that fails only after the recovery does not declare a second outage', async () => {
    const log = new EventLog('info');
    const health = new DbHealth(log.logger);
    health.backoffAfter(lost(), 'claim');
    // Sent into the outage (a connection the partition left hanging), failing later.
    const sentDuringOutage = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 5));
    health.ok(); // the probe answered: the outage is over
    health.backoffAfter(lost(), 'release', sentDuringOutage);
    expect(health.healthy).toBe(true);
    expect(log.named('db_unavailable')).toHaveLength(1);
    expect(log.named('db_recovered')).toHaveLength(1);
    // A statement sent after the recovery that loses its connection is a new outage.
    health.backoffAfter(lost(), 'claim', Date.now());
    expect(health.healthy).toBe(false);
    expect(log.named('db_unavailable')).toHaveLength(2);
  });
});
