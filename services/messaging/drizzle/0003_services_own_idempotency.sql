CREATE TABLE "messaging"."idempotency_keys" (
	"account_id" text NOT NULL,
	"livemode" boolean NOT NULL,
	"key_hash" text NOT NULL,
	"fingerprint" text NOT NULL,
	"response" "bytea" NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	CONSTRAINT "idempotency_keys_account_id_livemode_key_hash_pk" PRIMARY KEY("account_id","livemode","key_hash")
);
--> statement-breakpoint
DROP INDEX "messaging"."conversations_idempotency_idx";--> statement-breakpoint
DROP INDEX "messaging"."conversations_key_expiry_idx";--> statement-breakpoint
DROP INDEX "messaging"."messages_idempotency_idx";--> statement-breakpoint
DROP INDEX "messaging"."messages_key_expiry_idx";--> statement-breakpoint
CREATE INDEX "messaging_idempotency_keys_created_idx" ON "messaging"."idempotency_keys" USING btree ("created_at");--> statement-breakpoint
ALTER TABLE "messaging"."conversations" DROP COLUMN "idempotency_key";--> statement-breakpoint
ALTER TABLE "messaging"."messages" DROP COLUMN "idempotency_key";