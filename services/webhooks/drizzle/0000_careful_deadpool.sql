CREATE SCHEMA "webhooks";
--> statement-breakpoint
CREATE TABLE "webhooks"."attempts" (
	"delivery_id" text NOT NULL,
	"number" integer NOT NULL,
	"at" timestamp with time zone NOT NULL,
	"status_code" integer,
	"error" text,
	"latency_ms" integer NOT NULL,
	"response_excerpt" text
);
--> statement-breakpoint
CREATE TABLE "webhooks"."deliveries" (
	"id" text PRIMARY KEY NOT NULL,
	"event_id" text NOT NULL,
	"endpoint_id" text NOT NULL,
	"account_id" text NOT NULL,
	"livemode" boolean NOT NULL,
	"status" text NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp with time zone,
	"last_attempt_at" timestamp with time zone,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhooks"."endpoints" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"livemode" boolean NOT NULL,
	"url" text NOT NULL,
	"events" text[] NOT NULL,
	"description" text,
	"status" text NOT NULL,
	"secret_sealed" "bytea" NOT NULL,
	"idempotency_key" text,
	"failing_since" timestamp with time zone,
	"last_error" text,
	"created_at" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhooks"."events" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"livemode" boolean NOT NULL,
	"type" text NOT NULL,
	"payload" "bytea" NOT NULL,
	"body" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhooks"."notifications" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"endpoint_id" text NOT NULL,
	"kind" text NOT NULL,
	"detail" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"sent_at" timestamp with time zone
);
--> statement-breakpoint
CREATE UNIQUE INDEX "attempts_delivery_idx" ON "webhooks"."attempts" USING btree ("delivery_id","number");--> statement-breakpoint
CREATE UNIQUE INDEX "deliveries_event_endpoint_idx" ON "webhooks"."deliveries" USING btree ("event_id","endpoint_id");--> statement-breakpoint
CREATE INDEX "deliveries_due_idx" ON "webhooks"."deliveries" USING btree ("next_attempt_at") WHERE "webhooks"."deliveries"."status" = 'pending';--> statement-breakpoint
CREATE INDEX "deliveries_endpoint_idx" ON "webhooks"."deliveries" USING btree ("endpoint_id","id");--> statement-breakpoint
CREATE INDEX "endpoints_account_idx" ON "webhooks"."endpoints" USING btree ("account_id","livemode","id");--> statement-breakpoint
CREATE UNIQUE INDEX "endpoints_idempotency_idx" ON "webhooks"."endpoints" USING btree ("account_id","livemode","idempotency_key") WHERE "webhooks"."endpoints"."idempotency_key" is not null;--> statement-breakpoint
CREATE INDEX "events_account_idx" ON "webhooks"."events" USING btree ("account_id","livemode","id");--> statement-breakpoint
CREATE INDEX "notifications_unsent_idx" ON "webhooks"."notifications" USING btree ("created_at") WHERE "webhooks"."notifications"."sent_at" is null;