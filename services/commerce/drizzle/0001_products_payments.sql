CREATE TABLE "commerce"."payments" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"livemode" boolean NOT NULL,
	"order_id" text NOT NULL,
	"amount" bigint NOT NULL,
	"currency" text NOT NULL,
	"status" text NOT NULL,
	"failure_message" text,
	"provider" text NOT NULL,
	"provider_reference" text NOT NULL,
	"idempotency_key" text,
	"created_at" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "commerce"."products" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"livemode" boolean NOT NULL,
	"name" text NOT NULL,
	"description" text,
	"price" bigint NOT NULL,
	"currency" text NOT NULL,
	"active" boolean NOT NULL,
	"idempotency_key" text,
	"created_at" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "commerce"."payments" ADD CONSTRAINT "payments_order_id_orders_id_fk" FOREIGN KEY ("order_id") REFERENCES "commerce"."orders"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "payments_account_idx" ON "commerce"."payments" USING btree ("account_id","livemode","id");--> statement-breakpoint
CREATE INDEX "payments_order_idx" ON "commerce"."payments" USING btree ("account_id","livemode","order_id","id");--> statement-breakpoint
CREATE UNIQUE INDEX "payments_idempotency_idx" ON "commerce"."payments" USING btree ("account_id","livemode","idempotency_key") WHERE "commerce"."payments"."idempotency_key" is not null;--> statement-breakpoint
CREATE UNIQUE INDEX "payments_one_success_idx" ON "commerce"."payments" USING btree ("order_id") WHERE "commerce"."payments"."status" = 'succeeded';--> statement-breakpoint
CREATE INDEX "products_account_idx" ON "commerce"."products" USING btree ("account_id","livemode","id");--> statement-breakpoint
CREATE UNIQUE INDEX "products_idempotency_idx" ON "commerce"."products" USING btree ("account_id","livemode","idempotency_key") WHERE "commerce"."products"."idempotency_key" is not null;--> statement-breakpoint
CREATE INDEX "orders_status_idx" ON "commerce"."orders" USING btree ("account_id","livemode","status","id");