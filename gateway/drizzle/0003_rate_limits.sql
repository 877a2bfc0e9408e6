CREATE UNLOGGED TABLE "gateway"."rate_limits" (
	"account_id" text PRIMARY KEY NOT NULL,
	"tat" double precision NOT NULL,
	"granted" integer NOT NULL,
	"at" double precision NOT NULL
);
