// Generated protobuf code for every mcs API (see proto/ and `pnpm generate`), one namespace per
// proto package, plus a registry of all files so descriptor-driven code (the gateway's routes,
// REST rendering, OpenAPI) can see every service and message.
import { createRegistry } from '@bufbuild/protobuf';
import { file_mcs_accounts_v1_accounts } from './gen/mcs/accounts/v1/accounts_pb.js';
import { file_mcs_commerce_v1_commerce } from './gen/mcs/commerce/v1/commerce_pb.js';
import { file_mcs_events_v1_events } from './gen/mcs/events/v1/events_pb.js';
import { file_mcs_messaging_v1_messaging } from './gen/mcs/messaging/v1/messaging_pb.js';
import { file_mcs_webhooks_v1_endpoint } from './gen/mcs/webhooks/v1/endpoint_pb.js';
import { file_mcs_webhooks_v1_settings } from './gen/mcs/webhooks/v1/settings_pb.js';
import { file_mcs_webhooks_v1_webhooks } from './gen/mcs/webhooks/v1/webhooks_pb.js';

// The standard gRPC health and reflection protocols every service serves (kit/health, kit/reflection);
// not part of the REST API, so not in `files` below.
export * as grpcHealth from './gen/grpc/health/v1/health_pb.js';
export * as grpcReflection from './gen/grpc/reflection/v1/reflection_pb.js';
export * as grpcReflectionAlpha from './gen/grpc/reflection/v1alpha/reflection_pb.js';
export * as accounts from './gen/mcs/accounts/v1/accounts_pb.js';
export * as api from './gen/mcs/api/v1/annotations_pb.js';
export * as commerce from './gen/mcs/commerce/v1/commerce_pb.js';
export * as events from './gen/mcs/events/v1/events_pb.js';
export * as messaging from './gen/mcs/messaging/v1/messaging_pb.js';
export * as webhooks from './webhooks.ts';

/** Every mcs proto file; add a new file here and it joins the REST API. */
export const files = [
  file_mcs_accounts_v1_accounts,
  file_mcs_commerce_v1_commerce,
  file_mcs_events_v1_events,
  file_mcs_messaging_v1_messaging,
  file_mcs_webhooks_v1_endpoint,
  file_mcs_webhooks_v1_settings,
  file_mcs_webhooks_v1_webhooks,
];

export const registry = createRegistry(...files);
