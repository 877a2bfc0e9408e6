ALTER TABLE "accounts"."accounts" ADD COLUMN "password_hash" text;--> statement-breakpoint
ALTER TABLE "accounts"."accounts" ADD COLUMN "failed_logins" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "accounts"."accounts" ADD COLUMN "login_blocked_until" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "accounts"."api_keys" ADD COLUMN "last_used_at" timestamp with time zone;--> statement-breakpoint
CREATE UNIQUE INDEX "accounts_owner_email_idx" ON "accounts"."accounts" USING btree (lower("email")) WHERE "accounts"."accounts"."password_hash" is not null;