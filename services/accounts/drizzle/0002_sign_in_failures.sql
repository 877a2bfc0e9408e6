CREATE TABLE "accounts"."sign_in_failures" (
	"email" text PRIMARY KEY NOT NULL,
	"failures" integer NOT NULL,
	"blocked_until" timestamp with time zone,
	"last_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE INDEX "sign_in_failures_last_at_idx" ON "accounts"."sign_in_failures" USING btree ("last_at");--> statement-breakpoint
ALTER TABLE "accounts"."accounts" DROP COLUMN "failed_logins";--> statement-breakpoint
ALTER TABLE "accounts"."accounts" DROP COLUMN "login_blocked_until";