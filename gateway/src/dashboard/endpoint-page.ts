// One endpoint's page: its health, a 24-hour chart of attempts (succeeded/failed per hour, drawn
// as server-side SVG: no script, no chart library), latency percentiles, a test event, and the
// form that edits its events and description.
import type { Flash } from './flash.ts';
import {
  csrfField,
  type EndpointView,
  endpointPath,
  eventsFieldset,
  flashBox,
  html,
  layout,
  type SafeHtml,
  SETTINGS,
  STATUS_LABEL,
  time,
  type Viewer,
} from './views.ts';

export interface StatsView {
  buckets: Array<{ start: Date; succeeded: number; failed: number }>;
  p50: number;
  p90: number;
  p99: number;
  attempts: number;
}

const W = 720;
const H = 200;
const PAD = { left: 40, right: 8, top: 12, bottom: 26 };

/** Stacked bars per hour: green succeeded under red failed, with a labelled y axis. */
export function successChart(stats: StatsView): SafeHtml {
  const max = Math.max(1, ...stats.buckets.map((b) => b.succeeded + b.failed));
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const slot = plotW / Math.max(1, stats.buckets.length);
  const y = (v: number) => PAD.top + plotH - (v / max) * plotH;
  const total = stats.buckets.reduce((n, b) => n + b.succeeded, 0);
  const rate = stats.attempts === 0 ? null : Math.round((1000 * total) / stats.attempts) / 10;
  const bars = stats.buckets.map((b, i) => {
    const x = PAD.left + i * slot + slot * 0.15;
    const w = slot * 0.7;
    const hour = b.start.toISOString().slice(11, 13);
    const okH = (b.succeeded / max) * plotH;
    const failH = (b.failed / max) * plotH;
    return html`<g class="bar" data-hour="${b.start.toISOString()}" data-succeeded="${b.succeeded}" data-failed="${b.failed}"><title>${hour}:00 UTC: ${b.succeeded} succeeded, ${b.failed} failed</title>
<rect x="${x.toFixed(1)}" y="${(y(b.succeeded)).toFixed(1)}" width="${w.toFixed(1)}" height="${okH.toFixed(1)}" fill="#12b76a"></rect>
<rect x="${x.toFixed(1)}" y="${(y(b.succeeded) - failH).toFixed(1)}" width="${w.toFixed(1)}" height="${failH.toFixed(1)}" fill="#f04438"></rect>
${i % 3 === 0 ? html`<text x="${(x + w / 2).toFixed(1)}" y="${H - 8}" text-anchor="middle">${hour}h</text>` : ''}</g>`;
  });
  return html`<figure class="card"><figcaption><strong>Delivery attempts, last 24 hours</strong> (UTC, per hour):
${rate === null ? 'no attempts yet.' : html`<span id="success-rate">${rate}%</span> succeeded of ${stats.attempts}.`}</figcaption>
<svg class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="Attempts per hour over the last 24 hours: ${total} succeeded, ${stats.attempts - total} failed" font-size="11" fill="#5b5b70">
<line x1="${PAD.left}" y1="${PAD.top + plotH}" x2="${W - PAD.right}" y2="${PAD.top + plotH}" stroke="#d0d5dd"></line>
<text x="${PAD.left - 6}" y="${PAD.top + 4}" text-anchor="end">${max}</text>
<text x="${PAD.left - 6}" y="${PAD.top + plotH}" text-anchor="end">0</text>
${bars}</svg>
<p class="meta"><span style="color:#12b76a">■</span> succeeded <span style="color:#f04438">■</span> failed</p></figure>`;
}

export function endpointPage(opts: {
  viewer: Viewer;
  endpoint: EndpointView;
  stats: StatsView;
  eventTypes: readonly string[];
  flash?: Flash | undefined;
}): string {
  const { viewer, endpoint: ep, stats } = opts;
  const path = endpointPath(ep.id);
  const chosen = new Set(ep.events);
  const body = html`<p><a href="${SETTINGS}">← Webhook endpoints</a></p>
<h1 class="url">${ep.url}</h1>
<p class="lead"><span class="badge ${ep.status}">${STATUS_LABEL[ep.status]}</span> <span class="mono">${ep.id}</span> · added ${time(ep.createdAt)}
· <a href="${path}/deliveries">Deliveries</a></p>
${flashBox(opts.flash)}
${successChart(stats)}
<div class="card stats" id="latency"><div><span class="meta">p50 latency</span><strong data-p="50">${stats.p50} ms</strong></div>
<div><span class="meta">p90</span><strong data-p="90">${stats.p90} ms</strong></div>
<div><span class="meta">p99</span><strong data-p="99">${stats.p99} ms</strong></div>
<div><span class="meta">attempts, 24 h</span><strong>${stats.attempts}</strong></div></div>
<h2>Send a test event</h2>
<form class="card" method="post" action="${path}/test" id="send-test">${csrfField(viewer)}
<label class="field" for="test-type">Event type</label>
<select id="test-type" name="type">${opts.eventTypes.map((t) => html`<option value="${t}"${ep.events.includes(t) ? ' selected' : ''}>${t}</option>`)}</select>
<p class="meta">Sample data, signed like every delivery; not part of the account's event log.</p>
<div class="submit"><button type="submit" class="primary">Send test event</button></div></form>
<h2>Events and description</h2>
<form class="card" method="post" action="${path}" id="edit-endpoint">${csrfField(viewer)}
${eventsFieldset(opts.eventTypes, chosen)}
<label class="field" for="edit-description">Description <span class="meta">(optional)</span></label>
<input type="text" id="edit-description" name="description" maxlength="500" value="${ep.description ?? ''}">
<div class="submit"><button type="submit" class="primary">Save</button></div></form>`;
  return layout(`${ep.url} · mcs`, body, viewer);
}
