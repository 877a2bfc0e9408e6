CREATE TABLE "commerce"."idempotency_keys" (
	"account_id" text NOT NULL,
	"livemode" boolean NOT NULL,
	"key_hash" text NOT NULL,
	"fingerprint" text NOT NULL,
	"response" "bytea" NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	CONSTRAINT "idempotency_keys_account_id_livemode_key_hash_pk" PRIMARY KEY("account_id","livemode","key_hash")
);
--> statement-breakpoint
DROP INDEX "commerce"."orders_idempotency_idx";--> statement-breakpoint
DROP INDEX "commerce"."orders_key_expiry_idx";--> statement-breakpoint
DROP INDEX "commerce"."payments_idempotency_idx";--> statement-breakpoint
DROP INDEX "commerce"."payments_key_expiry_idx";--> statement-breakpoint
DROP INDEX "commerce"."products_idempotency_idx";--> statement-breakpoint
DROP INDEX "commerce"."products_key_expiry_idx";--> statement-breakpoint
CREATE INDEX "commerce_idempotency_keys_created_idx" ON "commerce"."idempotency_keys" USING btree ("created_at");--> statement-breakpoint
ALTER TABLE "commerce"."orders" DROP COLUMN "idempotency_key";--> statement-breakpoint
ALTER TABLE "commerce"."payments" DROP COLUMN "idempotency_key";--> statement-breakpoint
ALTER TABLE "commerce"."products" DROP COLUMN "idempotency_key";