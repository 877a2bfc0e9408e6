// mcs webhooks retry-schedule: the account's retry schedule. Test mode may shorten it for
// development (GET/POST /v1/webhook_settings); live mode shows the service's.
import { CliError, flag, type Parsed } from '../args.ts';
import type { Command } from '../context.ts';
import { fields } from '../output.ts';

const retrySchedule: Command = {
  name: 'webhooks retry-schedule',
  usage: 'mcs webhooks retry-schedule [DELAYS | --reset]',
  summary:
    "Shows the retry schedule of the key's mode; in test mode sets a shorter one of the account's own\n" +
    "(DELAYS: 1 to 5 delays, comma separated, each 1s–24h, e.g. 5s,30s) or goes back to the service's.",
  options: { reset: { type: 'boolean', description: "back to the service's schedule" } },
  positionals: [{ name: 'DELAYS', description: 'e.g. 5s,30s,2m (units ms s m h)', optional: true }],
  api: true,
  details:
    'A delivery makes at most 1 + (number of delays) attempts; when the last fails the endpoint turns\n' +
    'unhealthy, as with the service schedule. A new schedule applies from the next failure of each\n' +
    'delivery. To send a failed delivery again at once: mcs webhooks retry ENDPOINT_ID DELIVERY_ID.',
  async run(ctx, p: Parsed) {
    const delays = p.positionals[0];
    if (delays !== undefined && flag(p, 'reset')) throw new CliError('give DELAYS or --reset, not both');
    const api = await ctx.api();
    let settings: Record<string, unknown>;
    if (delays !== undefined) {
      const list = delays
        .split(',')
        .map((d) => d.trim())
        .filter(Boolean);
      settings = await ctx.progress('Saving', () =>
        api.post('/v1/webhook_settings', { retry_schedule: list }),
      );
    } else if (flag(p, 'reset')) {
      settings = await ctx.progress('Saving', () => api.post('/v1/webhook_settings', { reset: true }));
    } else {
      settings = await ctx.progress('Fetching', () => api.get('/v1/webhook_settings'));
    }
    ctx.print(settings, () =>
      fields([
        ['retry schedule', (settings.retry_schedule as string[]).join(', ')],
        ['whose', settings.custom ? "the account's (test mode)" : "the service's"],
        ['service default', (settings.default_retry_schedule as string[]).join(', ')],
        ['livemode', settings.livemode as boolean],
      ]),
    );
    return 0;
  },
};

export const SETTINGS_COMMANDS: Command[] = [retrySchedule];
