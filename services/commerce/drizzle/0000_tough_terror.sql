CREATE SCHEMA "commerce";
--> statement-breakpoint
CREATE TABLE "commerce"."orders" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"livemode" boolean NOT NULL,
	"status" text NOT NULL,
	"customer_name" text NOT NULL,
	"customer_phone" text NOT NULL,
	"currency" text NOT NULL,
	"total" bigint NOT NULL,
	"items" jsonb NOT NULL,
	"idempotency_key" text,
	"created_at" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "commerce"."outbox" (
	"seq" bigserial PRIMARY KEY NOT NULL,
	"event_id" text NOT NULL,
	"type" text NOT NULL,
	"payload" "bytea" NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "outbox_event_id_unique" UNIQUE("event_id")
);
--> statement-breakpoint
CREATE INDEX "orders_account_idx" ON "commerce"."orders" USING btree ("account_id","livemode","id");--> statement-breakpoint
CREATE UNIQUE INDEX "orders_idempotency_idx" ON "commerce"."orders" USING btree ("account_id","livemode","idempotency_key") WHERE "commerce"."orders"."idempotency_key" is not null;