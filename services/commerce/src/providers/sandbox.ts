// The sandbox payment provider: accepts every payment and settles it however the test helpers
// say. It keeps no state (the payment row is the state), so it behaves the same across restarts
// and replicas.
import type { PaymentProviders, SandboxPaymentProvider } from './payment-provider.ts';

export const SANDBOX_DECLINE = 'The sandbox declined the payment.';

export function createSandboxPaymentProvider(): SandboxPaymentProvider {
  return {
    name: 'sandbox',
    async open(request) {
      return { reference: `sandbox_${request.paymentId}` };
    },
    complete() {
      return { status: 'succeeded' };
    },
    fail(_reference, failureMessage) {
      return { status: 'failed', failureMessage: failureMessage || SANDBOX_DECLINE };
    },
  };
}

/**
 * The providers this build has: the sandbox for both modes, as no real provider is wired yet.
 * Live payments therefore stay pending (nothing settles them); test mode works end to end.
 */
export function sandboxProviders(): PaymentProviders {
  const sandbox = createSandboxPaymentProvider();
  return { live: sandbox, test: sandbox };
}
