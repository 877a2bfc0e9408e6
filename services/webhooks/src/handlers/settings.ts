// WebhookSettingsService over Connect: per-account settings (domain/settings.ts).
import { create } from '@bufbuild/protobuf';
import type { ServiceImpl } from '@connectrpc/connect';
import { callerOf } from '@mcs/kit/caller';
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
      const input = { retrySchedule: req.retrySchedule, reset: req.reset };
      return toProto(
        await deps.db.transaction((tx) => updateSettings(tx, callerOf(ctx), input, deps.schedule)),
      );
    },
  };
}
