import { describe, expect, it } from 'vitest';
import { listenAckSubject, listenPresenceSubject, listenSubject } from './listen.ts';

describe('listen subjects', () => {
  it('name one endpoint by its id', () => {
    expect(listenSubject('mcs', 'we_0123456789abcdefghjkmnpqrs')).toBe(
      'mcs.listen.we_0123456789abcdefghjkmnpqrs',
    );
    expect(listenAckSubject('mcs', 'we_x')).toBe('mcs.listen_ack.we_x');
    expect(listenPresenceSubject('mcs', 'we_x')).toBe('mcs.listen_presence.we_x');
  });

  it('refuse what would be protocol text or another subject', () => {
    for (const id of ['we_x y', 'we_x\r\nPUB a 1', 'we_x.y', 'we_*', '>', '', 'we_\u0000', 'x'.repeat(65)]) {
      expect(() => listenAckSubject('mcs', id), JSON.stringify(id)).toThrow('not an endpoint id');
      expect(() => listenSubject('mcs', id)).toThrow('not an endpoint id');
      expect(() => listenPresenceSubject('mcs', id)).toThrow('not an endpoint id');
    }
  });
});
