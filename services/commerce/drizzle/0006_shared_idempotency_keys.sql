-- Idempotency keys move to kit's idempotency.keys, one table for every service: a key is the
-- account's in one mode, so the same key on another service's route is another request (spec 7.4).
-- Each service's migration creates the table when it is missing (migrations run one at a time,
-- kit/db migrateSchema) and moves its own keys over, so a key taken before the upgrade still
-- replays after it. (A key held by two services keeps the first one copied.)
CREATE SCHEMA IF NOT EXISTS "idempotency";--> statement-breakpoint
CREATE TABLE IF NOT EXISTS "idempotency"."keys" (
	"account_id" text NOT NULL,
	"livemode" boolean NOT NULL,
	"key_hash" text NOT NULL,
	"fingerprint" text NOT NULL,
	"response" "bytea" NOT NULL,
	"sealed" boolean DEFAULT true NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	CONSTRAINT "keys_account_id_livemode_key_hash_pk" PRIMARY KEY("account_id","livemode","key_hash")
);--> statement-breakpoint
CREATE INDEX IF NOT EXISTS "idempotency_keys_created_idx" ON "idempotency"."keys" USING btree ("created_at");--> statement-breakpoint
INSERT INTO "idempotency"."keys" ("account_id", "livemode", "key_hash", "fingerprint", "response", "sealed", "created_at")
  SELECT "account_id", "livemode", "key_hash", "fingerprint", "response", "sealed", "created_at" FROM "commerce"."idempotency_keys"
  ON CONFLICT DO NOTHING;--> statement-breakpoint
DROP TABLE "commerce"."idempotency_keys" CASCADE;
