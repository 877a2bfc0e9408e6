// The sandbox channel: accepts every outbound message and delivers nothing; its customers write
// whatever the test helper says. It keeps no state (the messages table is the state), so it
// behaves the same across restarts and replicas.
import { newId } from '@mcs/kit/ids';
import type { Channels, SandboxChannel } from './channel.ts';

export function createSandboxChannel(): SandboxChannel {
  return {
    name: 'sandbox',
    async send(message) {
      return { channelMessageId: `sandbox_${message.messageId}` };
    },
    receive(from, text) {
      return { channelMessageId: newId('sandbox_in'), from, text };
    },
  };
}

/**
 * The channels this build has: the sandbox for both modes, as no real channel is wired yet.
 * Live messages are accepted and recorded but reach nobody.
 */
export function sandboxChannels(): Channels {
  const sandbox = createSandboxChannel();
  return { live: sandbox, test: sandbox };
}
