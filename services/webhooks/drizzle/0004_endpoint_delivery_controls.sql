ALTER TABLE "webhooks"."endpoints" ADD COLUMN "disabled_reason" text;--> statement-breakpoint
ALTER TABLE "webhooks"."endpoints" ADD COLUMN "warned_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "webhooks"."endpoints" ADD COLUMN "disable_on_gone" boolean DEFAULT true NOT NULL;--> statement-breakpoint
ALTER TABLE "webhooks"."endpoints" ADD COLUMN "max_rate" integer;--> statement-breakpoint
ALTER TABLE "webhooks"."endpoints" ADD COLUMN "paused_until" timestamp with time zone;--> statement-breakpoint
UPDATE "webhooks"."endpoints" SET "disabled_reason" = 'manual' WHERE "status" = 'disabled';
