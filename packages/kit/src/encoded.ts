// A handler's answer is encoded twice on a keyed write: once to be stored with the key
// (idempotency.answerBytes) and once to be sent (fast-unary). The second reuses the first's bytes.
// Only for answers, which are not changed once returned (a replay decodes a new message).
import { type DescMessage, type Message, toBinary } from '@bufbuild/protobuf';

const bytesOf = new WeakMap<Message, Uint8Array>();

/** The message's wire bytes: encoded once, then remembered for as long as the message lives. */
export function encodeAnswer(schema: DescMessage, message: Message): Uint8Array {
  let bytes = bytesOf.get(message);
  if (bytes === undefined) {
    bytes = toBinary(schema, message);
    bytesOf.set(message, bytes);
  }
  return bytes;
}
