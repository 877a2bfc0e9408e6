import type { ConnectRouter } from '@connectrpc/connect';
import { commerce } from '@mcs/proto';
import type { Deps } from './deps.ts';
import { orderHandlers } from './handlers/orders.ts';
import { paymentHandlers, paymentTestHelperHandlers } from './handlers/payments.ts';
import { productHandlers } from './handlers/products.ts';

/** Every RPC of the commerce service; shared by main.ts and the tests. */
export function routes(deps: Deps) {
  return (router: ConnectRouter) => {
    router.service(commerce.ProductService, productHandlers(deps));
    router.service(commerce.OrderService, orderHandlers(deps));
    router.service(commerce.PaymentService, paymentHandlers(deps));
    router.service(commerce.PaymentTestHelperService, paymentTestHelperHandlers(deps));
  };
}
