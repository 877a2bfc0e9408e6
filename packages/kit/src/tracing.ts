// OpenTelemetry traces, off unless OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) is set:
// then each part exports its spans over OTLP/HTTP (JSON) and one trace follows a write from the
// REST request (gateway, W3C `traceparent` from the client accepted) through the Connect call
// (metadata), the service's handler and outbox, the NATS message (headers), to the webhooks
// consumer and each delivery attempt. Log lines written inside a span carry its trace_id and
// span_id (kit/log).
//
// Off, nothing here runs on the hot path but a boolean test: callers check `tracing.enabled`
// before building anything, and the SDK is not even loaded.
import {
  type Context,
  context,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  trace,
} from '@opentelemetry/api';

export { type Context, context, type Span, SpanKind, SpanStatusCode, trace };

export const tracing = {
  enabled: false,
  /** Flushes what is buffered and stops exporting (on the way out). */
  shutdown: async (): Promise<void> => {},
};

/**
 * Sets up the SDK when an OTLP endpoint is configured. Standard variables apply:
 * OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS,
 * OTEL_SERVICE_NAME (default `mcs-<part>`), OTEL_BSP_SCHEDULE_DELAY (ms, default 5000),
 * OTEL_SDK_DISABLED=true.
 */
export async function initTracing(part: string): Promise<void> {
  const endpoint = process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!endpoint || process.env.OTEL_SDK_DISABLED === 'true' || tracing.enabled) return;
  const [{ AsyncLocalStorageContextManager }, { W3CTraceContextPropagator }, sdk, otlp, resources] =
    await Promise.all([
      import('@opentelemetry/context-async-hooks'),
      import('@opentelemetry/core'),
      import('@opentelemetry/sdk-trace'),
      import('@opentelemetry/exporter-trace-otlp-http'),
      import('@opentelemetry/resources'),
    ]);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  const provider = new sdk.TracerProvider({
    resource: resources.resourceFromAttributes({
      'service.name': process.env.OTEL_SERVICE_NAME || `mcs-${part}`,
      'service.namespace': 'mcs',
    }),
    spanProcessors: [
      new sdk.BatchSpanProcessor({
        exporter: new otlp.OTLPTraceExporter(),
        scheduledDelayMillis: Number(process.env.OTEL_BSP_SCHEDULE_DELAY) || 5_000,
      }),
    ],
  });
  trace.setGlobalTracerProvider(provider);
  tracing.enabled = true;
  tracing.shutdown = () => provider.shutdown().catch(() => {});
}

export function tracer() {
  return trace.getTracer('mcs');
}

/** The context carried by W3C trace headers (`traceparent`, `tracestate`) of any carrier. */
export function extractContext<C>(carrier: C, getter: TextMapGetter<C>): Context {
  return propagation.extract(ROOT_CONTEXT, carrier, getter);
}

/** Writes the trace headers of `ctx` (default: the active one) into a plain header object. */
export function injectHeaders(headers: Record<string, string>, ctx: Context = context.active()): void {
  propagation.inject(ctx, headers);
}

export const nodeHeadersGetter: TextMapGetter<NodeJS.Dict<string | string[]>> = {
  get: (h, key) => h[key],
  keys: (h) => Object.keys(h),
};

/** Getter for Fetch-style headers (Connect metadata). */
export const fetchHeadersGetter: TextMapGetter<Headers> = {
  get: (h, key) => h.get(key) ?? undefined,
  keys: (h) => [...h.keys()],
};

/** Ends `span` with an error status if `err` is given. */
export function endSpan(span: Span, err?: unknown): void {
  if (err !== undefined) {
    span.recordException(err instanceof Error ? err : String(err));
    span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
  }
  span.end();
}

/** Trace and span id of the active span, for log lines (kit/log); empty outside a span. */
export function activeTraceFields(): { trace_id?: string; span_id?: string } {
  const span = trace.getActiveSpan();
  if (!span) return {};
  const c = span.spanContext();
  return { trace_id: c.traceId, span_id: c.spanId };
}
