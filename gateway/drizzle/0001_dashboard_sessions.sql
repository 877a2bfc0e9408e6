CREATE TABLE "gateway"."sessions" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"livemode" boolean NOT NULL,
	"key_id" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"expires_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE INDEX "sessions_key_idx" ON "gateway"."sessions" USING btree ("key_id");--> statement-breakpoint
CREATE INDEX "sessions_expires_idx" ON "gateway"."sessions" USING btree ("expires_at");