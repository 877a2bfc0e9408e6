CREATE TABLE "webhooks"."account_settings" (
	"account_id" text PRIMARY KEY NOT NULL,
	"retry_schedule_ms" integer[] NOT NULL,
	"updated_at" timestamp with time zone NOT NULL
);
