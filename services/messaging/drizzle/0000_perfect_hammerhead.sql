CREATE SCHEMA "messaging";
--> statement-breakpoint
CREATE TABLE "messaging"."outbox" (
	"seq" bigserial PRIMARY KEY NOT NULL,
	"event_id" text NOT NULL,
	"type" text NOT NULL,
	"payload" "bytea" NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "outbox_event_id_unique" UNIQUE("event_id")
);
