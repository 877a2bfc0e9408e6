// The mcs.webhooks.v1 package: its files (the endpoint resource sits in a file of its own so
// the event envelope can carry it) as one namespace.
export * from './gen/mcs/webhooks/v1/endpoint_pb.js';
export * from './gen/mcs/webhooks/v1/settings_pb.js';
export * from './gen/mcs/webhooks/v1/webhooks_pb.js';
