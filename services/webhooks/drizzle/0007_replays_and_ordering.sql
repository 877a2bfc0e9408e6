CREATE TABLE "webhooks"."replays" (
	"id" text PRIMARY KEY NOT NULL,
	"kind" text NOT NULL,
	"account_id" text NOT NULL,
	"livemode" boolean NOT NULL,
	"endpoint_id" text,
	"since" timestamp with time zone NOT NULL,
	"until" timestamp with time zone,
	"type" text,
	"status" text NOT NULL,
	"cursor" text,
	"total" integer DEFAULT 0 NOT NULL,
	"queued" integer DEFAULT 0 NOT NULL,
	"next_run_at" timestamp with time zone,
	"created_at" timestamp with time zone NOT NULL,
	"completed_at" timestamp with time zone
);
--> statement-breakpoint
DROP INDEX "webhooks"."deliveries_event_endpoint_idx";--> statement-breakpoint
ALTER TABLE "webhooks"."deliveries" ADD COLUMN "origin" text DEFAULT 'event' NOT NULL;--> statement-breakpoint
ALTER TABLE "webhooks"."deliveries" ADD COLUMN "ordering_key" text;--> statement-breakpoint
ALTER TABLE "webhooks"."deliveries" ADD COLUMN "replay_id" text;--> statement-breakpoint
ALTER TABLE "webhooks"."endpoints" ADD COLUMN "ordering" text DEFAULT 'none' NOT NULL;--> statement-breakpoint
ALTER TABLE "webhooks"."endpoints" ADD COLUMN "auto_recover" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "webhooks"."endpoints" ADD COLUMN "probe_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "webhooks"."endpoints" ADD COLUMN "probes" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX "replays_due_idx" ON "webhooks"."replays" USING btree ("next_run_at") WHERE "webhooks"."replays"."status" = 'running';--> statement-breakpoint
CREATE INDEX "replays_account_idx" ON "webhooks"."replays" USING btree ("account_id","livemode","kind","id");--> statement-breakpoint
CREATE INDEX "deliveries_ordering_idx" ON "webhooks"."deliveries" USING btree ("endpoint_id","ordering_key","event_id") WHERE "webhooks"."deliveries"."status" = 'pending' and "webhooks"."deliveries"."ordering_key" is not null;--> statement-breakpoint
CREATE INDEX "deliveries_replay_idx" ON "webhooks"."deliveries" USING btree ("replay_id") WHERE "webhooks"."deliveries"."replay_id" is not null;--> statement-breakpoint
CREATE INDEX "endpoints_probe_idx" ON "webhooks"."endpoints" USING btree ("probe_at") WHERE "webhooks"."endpoints"."probe_at" is not null;--> statement-breakpoint
CREATE UNIQUE INDEX "deliveries_event_endpoint_idx" ON "webhooks"."deliveries" USING btree ("event_id","endpoint_id") WHERE "webhooks"."deliveries"."origin" = 'event';