// The guides of /docs: authentication, errors, pagination, idempotency, rate limits, test mode
// and webhooks. Examples and the event catalog come from the OpenAPI document, so they show
// what the API sends.
import { type CatalogEntry, catalog, type ErrorCode, statusOf } from '@mcs/errors';
import { codeBlock, escapeHtml, inline, json } from './docs-html.ts';
import { schemaHref } from './docs-reference.ts';
import type { OpenApiDocument } from './openapi.ts';

export interface Guide {
  path: string;
  title: string;
  body: (doc: OpenApiDocument, serverUrl: string) => string;
}

const h2 = (id: string, text: string) => `<h2 id="${id}"><a href="#${id}">${escapeHtml(text)}</a></h2>`;

const NODE_VERIFY = `import crypto from 'node:crypto';

const equal = (a, b) => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && crypto.timingSafeEqual(x, y); // constant time
};

// X-Service-Signature: hex HMAC-SHA256 of the raw body, keyed with the whole secret string.
export function verifyServiceSignature(secret, rawBody, header) {
  const expected = crypto.createHmac('sha256', secret).update(rawBody).digest('hex');
  return typeof header === 'string' && equal(expected, header);
}

// Standard Webhooks: key = base64-decoded part after "whsec_"; signed "{id}.{timestamp}.{body}".
export function verifyStandardWebhook(secret, rawBody, headers, toleranceSeconds = 300) {
  const id = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  const signatures = headers['webhook-signature'];
  if (!id || !timestamp || !signatures) return false;
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > toleranceSeconds) return false; // replay
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const expected = crypto
    .createHmac('sha256', key)
    .update(\`\${id}.\${timestamp}.\`)
    .update(rawBody)
    .digest('base64');
  return signatures.split(' ').some((s) => s.startsWith('v1,') && equal(expected, s.slice(3)));
}`;

const PYTHON_VERIFY = `import base64
import hashlib
import hmac
import time


def verify_service_signature(secret: str, raw_body: bytes, header: str) -> bool:
    """X-Service-Signature: hex HMAC-SHA256 of the raw body, keyed with the whole secret."""
    expected = hmac.new(secret.encode(), raw_body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, header or "")


def verify_standard_webhook(secret: str, raw_body: bytes, headers, tolerance: int = 300) -> bool:
    """Standard Webhooks: key = base64-decoded part after whsec_; signed "{id}.{timestamp}.{body}"."""
    msg_id = headers.get("webhook-id")
    timestamp = headers.get("webhook-timestamp")
    signatures = headers.get("webhook-signature") or ""
    if not msg_id or not timestamp or abs(time.time() - int(timestamp)) > tolerance:
        return False
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{msg_id}.{timestamp}.".encode() + raw_body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(
        hmac.compare_digest(expected, s[3:]) for s in signatures.split() if s.startswith("v1,")
    )`;

const GO_VERIFY = `package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// VerifyServiceSignature checks X-Service-Signature: hex HMAC-SHA256 of the raw body, keyed
// with the whole secret string.
func VerifyServiceSignature(secret string, body []byte, header string) bool {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	expected := hex.EncodeToString(mac.Sum(nil))
	return hmac.Equal([]byte(expected), []byte(header)) // constant time
}

// VerifyStandardWebhook checks the Standard Webhooks headers: key = base64-decoded part after
// "whsec_", signed "{id}.{timestamp}.{body}".
func VerifyStandardWebhook(secret string, body []byte, h http.Header, tolerance time.Duration) bool {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if id == "" || err != nil || time.Since(time.Unix(sec, 0)).Abs() > tolerance {
		return false
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	expected := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, s := range strings.Fields(sigs) {
		if sig, ok := strings.CutPrefix(s, "v1,"); ok && hmac.Equal([]byte(sig), []byte(expected)) {
			return true
		}
	}
	return false
}`;

const errorsByType = () => {
  const rows = new Map<string, { status: Set<number>; codes: ErrorCode[] }>();
  for (const [code, e] of Object.entries(catalog) as Array<[ErrorCode, CatalogEntry]>) {
    const row = rows.get(e.type) ?? { status: new Set(), codes: [] };
    row.status.add(statusOf(code));
    row.codes.push(code);
    rows.set(e.type, row);
  }
  return rows;
};

/** The operations that send events again, as the document describes them (where the API has them). */
function recoverySection(doc: OpenApiDocument): string {
  const wanted: Array<[string, string]> = [
    ['post', '/v1/webhooks/{id}/deliveries/{delivery}/retry'],
    ['post', '/v1/webhooks/{id}/recover'],
    ['post', '/v1/events/{id}/resend'],
    ['post', '/v1/event_resends'],
  ];
  const items = wanted.flatMap(([method, path]) => {
    const op = doc.paths[path]?.[method];
    if (!op) return [];
    return [
      `<li><a href="/docs/reference#${op.operationId}"><code>${method.toUpperCase()} ${escapeHtml(path)}</code></a> — ${inline(
        op.description ?? op.summary,
      )}</li>`,
    ];
  });
  const endpoint = (doc.components.schemas.WebhookEndpoint?.properties ?? {}) as Record<
    string,
    { description?: string }
  >;
  const options = ['ordering', 'auto_recover', 'max_rate']
    .filter((f) => endpoint[f])
    .map((f) => `<li><code>${f}</code>: ${inline(endpoint[f]!.description ?? '')}</li>`);
  return `${h2('recovery', 'Sending events again')}
<p>Every event stays in the event log, so nothing is lost while a receiver is down:</p><ul>${items.join('')}</ul>
${options.length ? `<p>Endpoint settings that shape deliveries:</p><ul>${options.join('')}</ul>` : ''}`;
}

export const guides: Guide[] = [
  {
    path: '/docs/authentication',
    title: 'Authentication',
    body: (_doc, serverUrl) => `<h1>Authentication</h1>
<p>Every request carries an API key in the <code>Authorization</code> header:</p>
${codeBlock(`curl ${serverUrl}/v1/products -H "Authorization: Bearer $MCS_API_KEY"`, 'sh')}
${h2('key-kinds', 'Key kinds')}
<table><thead><tr><th>Prefix</th><th>Kind</th><th>May</th></tr></thead><tbody>
<tr><td><code>sk_test_…</code></td><td>secret, test mode</td><td>every route, on <a href="/docs/test-mode">test-mode</a> data, including test helpers</td></tr>
<tr><td><code>sk_live_…</code></td><td>secret, live mode</td><td>every route but the test helpers, on live data</td></tr>
<tr><td><code>pk_test_…</code>, <code>pk_live_…</code></td><td>publishable</td><td>read the product catalog only: <a href="/docs/reference#ListProducts"><code>GET /v1/products</code></a> and <a href="/docs/reference#GetProduct"><code>GET /v1/products/{id}</code></a></td></tr>
</tbody></table>
<p>Secret keys stay on your servers. Publishable keys are meant for code that runs where anyone can read
it (a web page, an app), so they read only what is safe there: the products. Every other route — writes,
and reads of orders (customer phone numbers), payments, conversations, messages, events and webhook
endpoints — answers them <code>403</code> with type <code>permission_error</code> and code
<a href="/docs/errors#secret_key_required"><code>secret_key_required</code></a>.</p>
<p>Test and live keys of one account see separate data: each object carries <code>livemode</code>.</p>
${h2('failures', 'When authentication fails')}
<ul><li>No <code>Authorization</code> header: <code>401</code> <a href="/docs/errors#api_key_missing"><code>api_key_missing</code></a>.</li>
<li>A malformed, unknown, revoked or deleted key: <code>401</code> <a href="/docs/errors#api_key_invalid"><code>api_key_invalid</code></a>. A revoked key stops working at once.</li>
<li>A live key on a test helper: <code>403</code> <a href="/docs/errors#test_mode_only"><code>test_mode_only</code></a>.</li></ul>
${h2('keys', 'Getting and managing keys')}
<p>The operator creates an account and its keys with the command line; it prints the account with one key of each kind:</p>
${codeBlock('pnpm mcs accounts create --email you@example.com\npnpm mcs keys list --account acct_…\npnpm mcs keys create --account acct_… --kind secret\npnpm mcs keys revoke --account acct_… --key key_…', 'sh')}
<p>Webhook deliveries are not authenticated with a key but signed: see <a href="/docs/webhooks#signatures">verifying signatures</a>.</p>`,
  },
  {
    path: '/docs/errors',
    title: 'Errors',
    body: (_doc, serverUrl) => {
      const types = [...errorsByType()]
        .map(
          ([type, row]) =>
            `<tr><td><code>${type}</code></td><td>${[...row.status].sort().join(', ')}</td><td>${row.codes
              .map((c) => `<a href="#${c}"><code>${c}</code></a>`)
              .join(', ')}</td></tr>`,
        )
        .join('');
      const sections = (Object.entries(catalog) as Array<[ErrorCode, CatalogEntry]>)
        .map(
          ([code, e]) => `<section id="${code}"><h3><a href="#${code}">${code}</a></h3>
<p class="meta">type <code>${e.type}</code> · HTTP ${statusOf(code)}</p><p>${inline(e.doc)}</p>
<p>Default message: “${escapeHtml(e.message)}”</p></section>`,
        )
        .join('\n');
      return `<h1>Errors</h1>
<p>A <code>2xx</code> status means success. Every other answer has this body (<a href="${schemaHref('Error')}">Error</a>):</p>
${codeBlock(
  json({
    error: {
      type: 'invalid_request_error',
      code: 'missing_required_field',
      message: 'Missing required parameter: currency.',
      param: 'currency',
      doc_url: `${serverUrl}/docs/errors#missing_required_field`,
    },
  }),
  'json',
)}
<ul><li><code>type</code>: the category, which decides the status (below).</li>
<li><code>code</code>: what went wrong, for programs; documented here, at <code>doc_url</code>.</li>
<li><code>message</code>: for people; may change.</li>
<li><code>param</code>: the offending parameter, dotted for nested fields (<code>customer.phone</code>,
<code>items[0].quantity</code>); only when there is one.</li></ul>
<p>Every answer, success or not, has a <code>Request-Id</code> header: quote it when you report a problem.
<code>api_error</code> messages include it too.</p>
${h2('types', 'Types and statuses')}
<table><thead><tr><th>type</th><th>HTTP status</th><th>codes</th></tr></thead><tbody>${types}</tbody></table>
<p>What to do: fix the request (<code>invalid_request_error</code>), check the key (<code>authentication_error</code>),
use a secret key or another mode (<code>permission_error</code>), check the id (<code>not_found_error</code>),
wait <code>Retry-After</code> seconds (<code>rate_limit_error</code>, <a href="/docs/rate-limits">rate limits</a>), or retry
with backoff — safely, with an <a href="/docs/idempotency">Idempotency-Key</a> — on <code>api_error</code>.</p>
${h2('codes', 'Codes')}
${sections}`;
    },
  },
  {
    path: '/docs/pagination',
    title: 'Pagination',
    body: (_doc, serverUrl) => `<h1>Pagination</h1>
<p>Every list (<code>GET /v1/products</code>, <code>/v1/orders</code>, <code>/v1/events</code>, …) answers one page,
newest first:</p>
${codeBlock(json({ object: 'list', data: ['…'], has_more: true, url: '/v1/orders' }), 'json')}
<table><thead><tr><th>Parameter</th><th>Meaning</th></tr></thead><tbody>
<tr><td><code>limit</code></td><td>Objects per page: 1 to 100, 10 when absent. Anything else is <code>400</code> with <code>param: "limit"</code>: <a href="/docs/errors#invalid_type"><code>invalid_type</code></a> for what is not a whole number, <a href="/docs/errors#invalid_value"><code>invalid_value</code></a> for a number out of that range.</td></tr>
<tr><td><code>starting_after</code></td><td>The cursor: the <code>id</code> of the last object of the previous page. It must be an id of the listed kind (<code>ord_…</code> for orders), else <code>400</code> with <code>param: "starting_after"</code>.</td></tr>
</tbody></table>
<p>Ask for the next page while <code>has_more</code> is true:</p>
${codeBlock(
  `let startingAfter;
do {
  const url = new URL('${serverUrl}/v1/orders');
  url.searchParams.set('limit', '100');
  if (startingAfter) url.searchParams.set('starting_after', startingAfter);
  const page = await fetch(url, { headers: { authorization: \`Bearer \${key}\` } }).then((r) => r.json());
  for (const order of page.data) console.log(order.id, order.status);
  startingAfter = page.has_more ? page.data.at(-1).id : undefined;
} while (startingAfter);`,
  'js',
)}
<p>Some lists take filters besides (<code>status</code>, <code>type</code>, <code>order</code>, <code>active</code>): see
each list in the <a href="/docs/reference">reference</a>.</p>`,
  },
  {
    path: '/docs/idempotency',
    title: 'Idempotency',
    body: (_doc, serverUrl) => `<h1>Idempotency</h1>
<p>A network error leaves you not knowing whether a <code>POST</code> took effect. Send an
<code>Idempotency-Key</code> header (1 to 255 characters of your choosing, e.g. a UUID per operation) and retry
with the same key as often as needed: the operation happens once.</p>
${codeBlock(
  `curl -X POST ${serverUrl}/v1/orders \\
  -H "Authorization: Bearer $MCS_API_KEY" \\
  -H 'Content-Type: application/json' \\
  -H 'Idempotency-Key: 0b9d6c1e-5d0e-4f7b-9a51-4d2f1e1f0c3a' \\
  -d '{"customer":{"name":"Ada","phone":"+4915112345678"},"currency":"EUR","items":[{"name":"Tea","unit_amount":450,"quantity":2}]}'`,
  'sh',
)}
<ul>
<li>Same key, same request, within 24 hours: the first answer, byte for byte, with the header
<code>Idempotent-Replayed: true</code>. Nothing is created again and no event is sent again.</li>
<li>Same key, another method, path or body: <code>422</code>
<a href="/docs/errors#idempotency_key_reused"><code>idempotency_key_reused</code></a>.</li>
<li>Same key while the first request is still running: <code>409</code>
<a href="/docs/errors#idempotency_key_in_use"><code>idempotency_key_in_use</code></a>; retry shortly.</li>
<li>A key outside 1 to 255 characters: <code>400</code>
<a href="/docs/errors#invalid_idempotency_key"><code>invalid_idempotency_key</code></a>.</li>
<li>Only successful answers are kept: a request that failed validation wrote nothing and may be retried
with the same key once fixed.</li>
<li>Keys belong to one account and mode, and to the kind of resource written: products, orders and
payments share one set of keys, conversations and messages another, webhook endpoints, events and
settings a third (a key reused across two sets is a new key in the second). They are forgotten after
24 hours. <code>GET</code> and <code>DELETE</code> are idempotent by nature and ignore the header.</li>
</ul>`,
  },
  {
    path: '/docs/rate-limits',
    title: 'Rate limits',
    body: () => `<h1>Rate limits</h1>
<p>Each account may make a number of requests per second set by its plan (100 unless the operator set
another with <code>pnpm mcs accounts create --rate-limit R</code>); short bursts are smoothed. Over it,
requests are answered <code>429</code> with type <code>rate_limit_error</code>, code
<a href="/docs/errors#rate_limited"><code>rate_limited</code></a> and a <code>Retry-After</code> header: the whole
number of seconds to wait.</p>
${codeBlock(
  `HTTP/1.1 429 Too Many Requests
Retry-After: 1
Request-Id: req_…
Content-Type: application/json

{"error":{"type":"rate_limit_error","code":"rate_limited","message":"Too many requests. Wait for the number of seconds in the Retry-After header, then retry.","doc_url":"…/docs/errors#rate_limited"}}`,
  'http',
)}
<p>Wait that long, then retry (with the same <a href="/docs/idempotency">Idempotency-Key</a> for a POST). The
limit counts every request of the account, test and live keys together, however many gateway replicas
serve it.</p>`,
  },
  {
    path: '/docs/test-mode',
    title: 'Test mode',
    body: (_doc, serverUrl) => `<h1>Test mode</h1>
<p>Every account has two separate sets of data: test and live. <code>sk_test_</code>/<code>pk_test_</code> keys see
test data only, <code>sk_live_</code>/<code>pk_live_</code> keys live data only; every object says which in
<code>livemode</code>, and so does every event. Webhook endpoints belong to one mode too and receive its events.</p>
${h2('test-helpers', 'Test helpers')}
<p>In test mode nothing reaches a real payment provider or customer. Routes under <code>/v1/test_helpers</code>
play their part; they answer only to test-mode keys (a live key gets <code>403</code>
<a href="/docs/errors#test_mode_only"><code>test_mode_only</code></a>):</p>
<ul>
<li><a href="/docs/reference#CompletePayment"><code>POST /v1/test_helpers/payments/{id}/complete</code></a> — the provider confirms: <code>payment.completed</code>, and the order becomes <code>paid</code> (<code>order.updated</code>).</li>
<li><a href="/docs/reference#FailPayment"><code>POST /v1/test_helpers/payments/{id}/fail</code></a> — the provider declines: <code>payment.failed</code>.</li>
<li><a href="/docs/reference#CreateInboundMessage"><code>POST /v1/test_helpers/conversations/{conversation}/inbound_messages</code></a> — the customer writes: <code>message.received</code>.</li>
</ul>
${codeBlock(
  `curl -X POST ${serverUrl}/v1/test_helpers/payments/pay_…/complete \\
  -H "Authorization: Bearer $MCS_TEST_KEY" -H 'Content-Type: application/json' -d '{}'`,
  'sh',
)}
${h2('test-events', 'Test events')}
<p><a href="/docs/reference#SendTestWebhook"><code>POST /v1/webhooks/{id}/test</code></a> sends one event with sample
data to one endpoint (in either mode), to check a receiver; test events are not part of the event log.
From a terminal, <code>pnpm mcs trigger order.created</code> makes a real test-mode event of any type.</p>`,
  },
  {
    path: '/docs/webhooks',
    title: 'Webhooks',
    body: (doc, serverUrl) => {
      const catalogRows = Object.entries(doc.webhooks)
        .map(
          ([type, hook]) =>
            `<tr><td><a href="#event-${type}"><code>${type}</code></a></td><td>${inline(hook.post.description?.split(' POSTed')[0] ?? '')}</td></tr>`,
        )
        .join('');
      const examples = Object.entries(doc.webhooks)
        .map(([type, hook]) => {
          const media = hook.post.requestBody!.content['application/json'];
          const ref = String(media.schema.$ref ?? '')
            .split('/')
            .at(-1)!;
          return `<section class="event" id="event-${type}"><h3><a href="#event-${type}"><code>${type}</code></a></h3>
<p>${inline(hook.post.description ?? '')} Payload: <a href="${schemaHref(ref)}">${escapeHtml(ref)}</a>.</p>
${codeBlock(json(media.example), 'json')}</section>`;
        })
        .join('\n');
      return `<h1>Webhooks</h1>
<p>mcs POSTs every change to the URLs you subscribe, as it happens, signed so you can trust it.</p>
${h2('endpoints', 'Subscribing an endpoint')}
${codeBlock(
  `curl -X POST ${serverUrl}/v1/webhooks \\
  -H "Authorization: Bearer $MCS_API_KEY" -H 'Content-Type: application/json' \\
  -d '{"url":"https://example.com/webhooks","events":["order.created","order.updated"],"description":"Order sync"}'`,
  'sh',
)}
<p>The answer holds the endpoint's signing <code>secret</code> (<code>whsec_…</code>): keep it, it is shown only
now (<a href="/docs/reference#RotateWebhookEndpointSecret">rotating</a> gives a new one). <code>events</code> lists event
types, or <code>"*"</code> for every resource type below. Endpoint URLs are <code>https://</code> on a public host
unless the server was started to allow otherwise. Manage endpoints with the
<a href="/docs/reference#tag-webhook-endpoints">webhook endpoint routes</a> or the dashboard (Settings → API).</p>
${h2('events', 'Event types')}
<p>Each delivery body is an <a href="${schemaHref('Event')}">Event</a>: <code>id</code> (<code>evt_…</code>),
<code>object: "event"</code>, <code>type</code>, <code>created_at</code>, <code>livemode</code> and <code>data</code> — the
resource exactly as the REST API renders it (its own <code>id</code> and <code>object</code>). The same events are in
<a href="/docs/reference#ListEvents"><code>GET /v1/events</code></a>.</p>
<table><thead><tr><th>type</th><th>when</th></tr></thead><tbody>${catalogRows}</tbody></table>
${examples}
${h2('delivery', 'Delivery')}
<ul>
<li>Each event is sent as <code>POST</code> with <code>Content-Type: application/json</code> to every enabled endpoint
subscribed to its type.</li>
<li>Answer any <code>2xx</code> within 10 seconds (the server's <code>WEBHOOK_TIMEOUT</code>) — do slow work
afterwards. Anything else, a time-out or a connection error is a failed attempt.</li>
<li>Deliveries can repeat (a retry after an answer that got lost) and can arrive out of order: deduplicate
on the event <code>id</code> (also the <code>webhook-id</code> header) and order by <code>created_at</code>.</li>
</ul>
${h2('signatures', 'Verifying signatures')}
<p>Every delivery carries two signatures; check either. Compute over the <em>raw</em> body bytes — never a
re-serialized object — and compare in constant time. Answer <code>401</code> when neither verifies.</p>
<table><thead><tr><th>Scheme</th><th>Headers</th><th>Value</th></tr></thead><tbody>
<tr><td>mcs</td><td><code>X-Service-Signature</code></td><td>lowercase hex HMAC-SHA256 of the body, keyed with the whole secret string (<code>whsec_</code> included)</td></tr>
<tr><td><a href="https://www.standardwebhooks.com/">Standard Webhooks</a></td><td><code>webhook-id</code>, <code>webhook-timestamp</code>, <code>webhook-signature</code></td><td><code>v1,</code> + base64 HMAC-SHA256 of <code>{webhook-id}.{webhook-timestamp}.{body}</code>, keyed with the base64-decoded part of the secret after <code>whsec_</code>. Reject timestamps more than 5 minutes off: replays of old deliveries fail.</td></tr>
</tbody></table>
<h3 id="verify-node"><a href="#verify-node">Node.js</a></h3>
${codeBlock(NODE_VERIFY, 'js', ' data-snippet="node"')}
<p>In this repository, <code>packages/webhook-verify</code> (<code>verifyWebhook(secret, rawBody, headers)</code>) does both and parses the event.</p>
<h3 id="verify-python"><a href="#verify-python">Python</a></h3>
${codeBlock(PYTHON_VERIFY, 'python', ' data-snippet="python"')}
<h3 id="verify-go"><a href="#verify-go">Go</a></h3>
${codeBlock(GO_VERIFY, 'go', ' data-snippet="go"')}
${h2('retries', 'Retries')}
<p>A failed attempt is retried after 30 seconds, 5 minutes, 30 minutes, 2 hours and 24 hours (the server's
<code>WEBHOOK_RETRY_SCHEDULE</code>): at most 6 attempts. A <code>429</code> or <code>503</code> answer with
<code>Retry-After</code> (seconds or an HTTP date) pauses that endpoint until then: its other deliveries wait too,
without spending retries, and the refused one is retried no sooner than its schedule says. The pause is capped by
what the schedule has left, so no value parks deliveries beyond it. An endpoint's <code>max_rate</code> (deliveries
per second, <code>null</code> = unlimited) paces it. Other endpoints are never slowed. Every attempt is recorded:
<a href="/docs/reference#ListWebhookDeliveries"><code>GET /v1/webhooks/{id}/deliveries</code></a> lists the deliveries
to an endpoint with each attempt's status code, error, latency and the start of your answer, and
<a href="/docs/reference#RetryWebhookDelivery">retry</a> sends one again now.</p>
${recoverySection(doc)}
${h2('health', 'Endpoint health')}
<ul>
<li><code>enabled</code>: deliveries flow. While attempts fail, <code>failing_since</code> and <code>last_error</code>
say since when and why (both <code>null</code> when healthy). Once an endpoint has failed for an hour (the server's
<code>WEBHOOK_WARN_AFTER</code>) or a delivery has spent half its retries, the account's e-mail address gets one
warning; a successful delivery ends the stretch.</li>
<li><code>unhealthy</code>: the last retry of a delivery failed. The account's e-mail address is told once; nothing
more is sent to the endpoint and its new deliveries are skipped until it is re-enabled with
<a href="/docs/reference#EnableWebhookEndpoint"><code>POST /v1/webhooks/{id}/enable</code></a> (or in the dashboard).</li>
<li><code>disabled</code>: turned off (<code>disabled_reason: "manual"</code>, by an
<a href="/docs/reference#UpdateWebhookEndpoint">update</a> with <code>disabled: true</code> or the dashboard) or because the
receiver answered <code>410 Gone</code> (<code>"gone"</code>: at once, without retries, with one e-mail; set
<code>disable_on_gone: false</code> to have a 410 retried like any other failure). <code>enable</code> turns it on
again.</li>
</ul>
<p>Endpoints that list the operational types <code>webhook_endpoint.unhealthy</code>,
<code>webhook_endpoint.disabled</code> and <code>webhook_endpoint.enabled</code> explicitly (<code>"*"</code> does not
include them) get an event on each of these changes of another endpoint: signed like any delivery, listed in
<code>GET /v1/events</code>, with the endpoint (without its secret) as <code>data</code>. An endpoint never gets the
event about itself.</p>`;
    },
  },
];
