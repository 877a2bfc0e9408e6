// The edge between messaging and the networks that carry messages (SMS, WhatsApp, …). A channel
// sends outbound text and has an inbound path that turns what it receives into InboundMessages
// (a real channel's webhook; the sandbox's test helper).

export interface OutboundMessage {
  /** Our message id: channels take it as their idempotency key, so a retried send sends once. */
  messageId: string;
  /** E.164. */
  to: string;
  text: string;
  livemode: boolean;
}

export interface InboundMessage {
  /** The channel's own id for the message: a channel delivering it twice records it once. */
  channelMessageId: string;
  /** E.164. */
  from: string;
  text: string;
}

/** The channel refused or could not take a message; nothing is recorded, the caller may retry. */
export class ChannelError extends Error {
  override name = 'ChannelError';
}

export interface Channel {
  /** Stored with each message. */
  readonly name: string;
  /** Hands the message over; resolves the channel's id for it once accepted, or throws ChannelError. */
  send(message: OutboundMessage): Promise<{ channelMessageId: string }>;
}

/** A channel whose customers are simulated by the caller (the test helpers). */
export interface SandboxChannel extends Channel {
  readonly name: 'sandbox';
  /** The sandbox's inbound path: the customer at `from` writes `text`. */
  receive(from: string, text: string): InboundMessage;
}

/** The channels of each mode: test mode always talks through the sandbox. */
export interface Channels {
  live: Channel;
  test: SandboxChannel;
}
