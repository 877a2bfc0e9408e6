-- Rows made before versions existed start at 0 (their earlier events carried none, so the next one, 1, waits for nothing); new rows start at 1 (their created event). ADD COLUMN with a constant default rewrites no row.
ALTER TABLE "commerce"."orders" ADD COLUMN "version" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "commerce"."orders" ALTER COLUMN "version" SET DEFAULT 1;--> statement-breakpoint
ALTER TABLE "commerce"."outbox" ADD COLUMN "resource_version" integer;--> statement-breakpoint
ALTER TABLE "commerce"."payments" ADD COLUMN "version" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "commerce"."products" ADD COLUMN "version" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "commerce"."products" ALTER COLUMN "version" SET DEFAULT 1;
