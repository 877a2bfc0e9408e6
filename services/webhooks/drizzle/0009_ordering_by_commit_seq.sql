DROP INDEX "webhooks"."deliveries_ordering_idx";--> statement-breakpoint
ALTER TABLE "webhooks"."deliveries" ADD COLUMN "ordering_seq" bigint;--> statement-breakpoint
ALTER TABLE "webhooks"."deliveries" ADD COLUMN "ordering_lease" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "webhooks"."deliveries" ADD COLUMN "ordering_held" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "webhooks"."events" ADD COLUMN "outbox_seq" bigint;--> statement-breakpoint
CREATE INDEX "deliveries_ordering_idx" ON "webhooks"."deliveries" USING btree ("endpoint_id","ordering_key","ordering_seq") WHERE "webhooks"."deliveries"."status" = 'pending' and "webhooks"."deliveries"."ordering_key" is not null;--> statement-breakpoint
-- Deliveries keyed before events carried their outbox seq cannot be placed in commit order: they go unordered.
UPDATE "webhooks"."deliveries" SET "ordering_key" = NULL WHERE "ordering_key" IS NOT NULL AND "ordering_seq" IS NULL;
