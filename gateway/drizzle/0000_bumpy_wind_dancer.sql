CREATE SCHEMA "gateway";
--> statement-breakpoint
CREATE TABLE "gateway"."idempotency_keys" (
	"account_id" text NOT NULL,
	"livemode" boolean NOT NULL,
	"key_hash" text NOT NULL,
	"fingerprint" text NOT NULL,
	"state" text NOT NULL,
	"locked_until" timestamp with time zone NOT NULL,
	"status" integer,
	"body" "bytea",
	"created_at" timestamp with time zone NOT NULL,
	CONSTRAINT "idempotency_keys_account_id_livemode_key_hash_pk" PRIMARY KEY("account_id","livemode","key_hash")
);
--> statement-breakpoint
CREATE INDEX "idempotency_created_idx" ON "gateway"."idempotency_keys" USING btree ("created_at");