export { createTestCerts, type TestCerts } from './certs.ts';
export { createTestDatabase, type TestDatabase } from './db.ts';
export {
  type ReflectionAnswer,
  type ServingStatus,
  type StockHealthClient,
  stockHealthClient,
  stockReflectionClient,
} from './grpc-stock.ts';
export {
  callerMeta,
  type EventProbe,
  type ServiceHarness,
  type ServiceUnderTest,
  startEventProbe,
  startServiceHarness,
  startServiceUnderTest,
} from './harness.ts';
export { createTestNats, type TestNats } from './nats.ts';
export { canSilenceLinks, type SilentLink, silentLink } from './netns.ts';
export { type Received, type Receiver, type Reply, startReceiver } from './receiver.ts';
export {
  type PrivateNats,
  type PrivatePostgres,
  privateNats,
  privatePort,
  privatePostgres,
} from './servers.ts';
export {
  apiErrorOf,
  freshDatabase,
  grpcClient,
  type MigratedDatabase,
  secondWaitsForFirst,
} from './service.ts';
export { parseMail, type ReceivedMail, type SmtpServer, startSmtpServer } from './smtp.ts';
export {
  type AccountKeys,
  type ApiResponse,
  type Exit,
  freeBasePort,
  PARTS,
  type Part,
  REPO_ROOT,
  type Stack,
  startStack,
  testStackEnv,
  waitForPort,
} from './stack.ts';
export { type NotYet, type UntilOptions, until } from './until.ts';
