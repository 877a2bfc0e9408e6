// The edge between commerce and whoever moves the money. A provider opens a payment when the API
// creates one; its answer (succeeded or failed) arrives later through the provider's own inbound
// path (a real provider's webhook; the sandbox's test helpers) as a PaymentOutcome.

export interface PaymentRequest {
  /** Our payment id: providers take it as their idempotency key, so a retried call opens one payment. */
  paymentId: string;
  orderId: string;
  amount: number;
  currency: string;
  livemode: boolean;
}

export type PaymentOutcome = { status: 'succeeded' } | { status: 'failed'; failureMessage: string };

export interface PaymentProvider {
  /** Stored with each payment, so its outcome is taken from the provider that holds it. */
  readonly name: string;
  /** Opens the payment at the provider; resolves the provider's reference for it. */
  open(request: PaymentRequest): Promise<{ reference: string }>;
}

/** The providers of each mode: test mode always pays through the sandbox. */
export interface PaymentProviders {
  live: PaymentProvider;
  test: SandboxPaymentProvider;
}

/** A provider whose outcomes are decided by the caller (the test helpers). */
export interface SandboxPaymentProvider extends PaymentProvider {
  readonly name: 'sandbox';
  complete(reference: string): PaymentOutcome;
  fail(reference: string, failureMessage?: string): PaymentOutcome;
}
