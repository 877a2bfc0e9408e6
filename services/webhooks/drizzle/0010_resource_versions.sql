ALTER TABLE "webhooks"."deliveries" ADD COLUMN "ordering_version" integer;--> statement-breakpoint
ALTER TABLE "webhooks"."events" ADD COLUMN "resource_key" text;--> statement-breakpoint
ALTER TABLE "webhooks"."events" ADD COLUMN "resource_version" integer;--> statement-breakpoint
CREATE INDEX "events_resource_version_idx" ON "webhooks"."events" USING btree ("resource_key","resource_version") WHERE "webhooks"."events"."resource_version" is not null;