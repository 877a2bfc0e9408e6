CREATE TABLE "webhooks"."idempotency_keys" (
	"account_id" text NOT NULL,
	"livemode" boolean NOT NULL,
	"key_hash" text NOT NULL,
	"fingerprint" text NOT NULL,
	"response" "bytea" NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	CONSTRAINT "idempotency_keys_account_id_livemode_key_hash_pk" PRIMARY KEY("account_id","livemode","key_hash")
);
--> statement-breakpoint
DROP INDEX "webhooks"."endpoints_idempotency_idx";--> statement-breakpoint
DROP INDEX "webhooks"."endpoints_key_expiry_idx";--> statement-breakpoint
CREATE INDEX "webhooks_idempotency_keys_created_idx" ON "webhooks"."idempotency_keys" USING btree ("created_at");--> statement-breakpoint
ALTER TABLE "webhooks"."endpoints" DROP COLUMN "idempotency_key";