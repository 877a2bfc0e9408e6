// WebhookSettingsService over Connect: per-account settings (domain/settings.ts).
import { create } from '@bufbuild/protobuf';
import type { ServiceImpl } from '@connectrpc/connect';
import { callerOf } from '@mcs/kit/caller';
import { writeKeyed } from '@mcs/kit/idempotency';
import { webhooks } from '@mcs/proto';
import type { Deps } from '../deps.ts';
import { getSettings, type Settings, updateSettings } from '../domain/settings.ts';

const toProto = (s: Settings) => create(webhooks.WebhookSettingsSchema, s);

export function settingsHandlers(deps: Deps): ServiceImpl<typeof webhooks.WebhookSettingsService> {
  return {
    async getWebhookSettings(_req, ctx) {
      return toProto(await getSettings(deps.db, callerOf(ctx), deps.schedule));
    },
    async updateWebhookSettings(req, ctx) {
      const caller = callerOf(ctx);
      const input = { retrySchedule: req.retrySchedule, reset: req.reset };
      // Once per idempotency key, like every write (kit/idempotency): a retry gets the first
      // answer, even when the settings changed since.
      return writeKeyed(deps.db, deps.keys, ctx, caller, async (tx) =>
        toProto(await updateSettings(tx, caller, input, deps.schedule)),
      );
    },
  };
}
