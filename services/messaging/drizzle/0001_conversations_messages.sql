CREATE TABLE "messaging"."conversations" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"livemode" boolean NOT NULL,
	"customer_name" text NOT NULL,
	"customer_phone" text NOT NULL,
	"status" text NOT NULL,
	"idempotency_key" text,
	"created_at" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone NOT NULL,
	"closed_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "messaging"."messages" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"livemode" boolean NOT NULL,
	"conversation_id" text NOT NULL,
	"direction" text NOT NULL,
	"status" text NOT NULL,
	"text" text NOT NULL,
	"channel" text NOT NULL,
	"channel_message_id" text,
	"idempotency_key" text,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "messaging"."messages" ADD CONSTRAINT "messages_conversation_id_conversations_id_fk" FOREIGN KEY ("conversation_id") REFERENCES "messaging"."conversations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "conversations_account_idx" ON "messaging"."conversations" USING btree ("account_id","livemode","id");--> statement-breakpoint
CREATE INDEX "conversations_status_idx" ON "messaging"."conversations" USING btree ("account_id","livemode","status","id");--> statement-breakpoint
CREATE UNIQUE INDEX "conversations_idempotency_idx" ON "messaging"."conversations" USING btree ("account_id","livemode","idempotency_key") WHERE "messaging"."conversations"."idempotency_key" is not null;--> statement-breakpoint
CREATE UNIQUE INDEX "conversations_open_phone_idx" ON "messaging"."conversations" USING btree ("account_id","livemode","customer_phone") WHERE "messaging"."conversations"."status" = 'open';--> statement-breakpoint
CREATE INDEX "messages_conversation_idx" ON "messaging"."messages" USING btree ("account_id","livemode","conversation_id","id");--> statement-breakpoint
CREATE UNIQUE INDEX "messages_idempotency_idx" ON "messaging"."messages" USING btree ("account_id","livemode","idempotency_key") WHERE "messaging"."messages"."idempotency_key" is not null;--> statement-breakpoint
CREATE UNIQUE INDEX "messages_channel_idx" ON "messaging"."messages" USING btree ("account_id","livemode","channel","channel_message_id") WHERE "messaging"."messages"."channel_message_id" is not null;