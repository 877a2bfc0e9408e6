// A JetStream namespace per test run: a unique prefix for stream, subjects and consumers on the
// NATS server of NATS_URL, removed afterwards.
import { randomBytes } from 'node:crypto';
import { DEFAULT_NATS_URL } from '@mcs/kit/config';
import { streamNames } from '@mcs/kit/nats';
import { natsConnectOptions } from '@mcs/kit/nats-url';
import { connect } from 'nats';

export interface TestNats {
  url: string;
  prefix: string;
  drop(): Promise<void>;
}

export function createTestNats(url: string = process.env.NATS_URL ?? DEFAULT_NATS_URL): TestNats {
  const prefix = `t${randomBytes(6).toString('hex')}`;
  return {
    url,
    prefix,
    async drop() {
      const nc = await connect(natsConnectOptions(url));
      try {
        const jsm = await nc.jetstreamManager();
        await jsm.streams.delete(streamNames(prefix).stream).catch(() => {});
      } finally {
        await nc.close();
      }
    },
  };
}
