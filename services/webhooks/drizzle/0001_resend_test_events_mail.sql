DROP INDEX "webhooks"."notifications_unsent_idx";--> statement-breakpoint
ALTER TABLE "webhooks"."deliveries" ADD COLUMN "schedule_start" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "webhooks"."events" ADD COLUMN "test" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "webhooks"."notifications" ADD COLUMN "next_attempt_at" timestamp with time zone DEFAULT now() NOT NULL;--> statement-breakpoint
ALTER TABLE "webhooks"."notifications" ADD COLUMN "attempts" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "webhooks"."notifications" ADD COLUMN "last_error" text;--> statement-breakpoint
CREATE INDEX "events_account_type_idx" ON "webhooks"."events" USING btree ("account_id","livemode","type","id");--> statement-breakpoint
CREATE INDEX "notifications_due_idx" ON "webhooks"."notifications" USING btree ("next_attempt_at") WHERE "webhooks"."notifications"."sent_at" is null;