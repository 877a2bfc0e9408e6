// The dashboard's HTML, rendered on the server: no scripts, no external assets, one small inline
// style sheet. Every interpolated value goes through `html`, which escapes it unless it is
// markup this file built itself, so data from accounts (URLs, descriptions, receivers' answers)
// can never become markup.
import type { Flash } from './flash.ts';

/** Markup that is already safe; only `html` and `raw` make one. */
export class SafeHtml {
  readonly value: string;
  constructor(value: string) {
    this.value = value;
  }
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

function piece(v: unknown): string {
  if (v instanceof SafeHtml) return v.value;
  if (Array.isArray(v)) return v.map(piece).join('');
  if (v === null || v === undefined || v === false) return '';
  return escapeHtml(String(v));
}

/** A template whose interpolations are escaped (arrays are joined, null/undefined/false omitted). */
export function html(strings: TemplateStringsArray, ...values: unknown[]): SafeHtml {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += piece(values[i]) + strings[i + 1]!;
  return new SafeHtml(out);
}

export type EndpointStatus = 'enabled' | 'unhealthy' | 'disabled' | 'unknown';
export type DeliveryStatus = 'pending' | 'succeeded' | 'failed' | 'skipped' | 'unknown';

export interface EndpointView {
  id: string;
  url: string;
  events: string[];
  description: string | null;
  status: EndpointStatus;
  /** While disabled: "gone" (the receiver answered 410) or "manual". */
  disabledReason: string | null;
  failingSince: Date | null;
  lastError: string | null;
  /** Deliveries per second at most; null: unlimited. */
  maxRate: number | null;
  createdAt: Date | null;
}

export interface AttemptView {
  number: number;
  at: Date | null;
  statusCode: number | null;
  error: string | null;
  latencyMs: number;
  responseExcerpt: string | null;
}

export interface DeliveryView {
  id: string;
  /** The endpoint's id. */
  endpoint: string;
  event: string;
  eventType: string | null;
  status: DeliveryStatus;
  attemptCount: number;
  nextAttemptAt: Date | null;
  createdAt: Date | null;
  attempts: AttemptView[];
}

/** Who is signed in, and the CSRF token every form of the page carries. */
export interface Viewer {
  accountId: string;
  email: string | null;
  livemode: boolean;
  csrf: string;
  /** Signed in with e-mail and password (may switch modes), not with an API key. */
  owner: boolean;
  /** The page's own path (the mode switch comes back to it). */
  path: string;
}

export const BASE = '/dashboard';
export const SETTINGS = `${BASE}/settings/api`;
export const endpointPath = (id: string) => `${SETTINGS}/webhooks/${encodeURIComponent(id)}`;
export const KEYS = `${SETTINGS}/keys`;
export const EVENTS = `${BASE}/events`;
export const eventPath = (id: string) => `${EVENTS}/${encodeURIComponent(id)}`;

/**
 * The dashboard's only script: copy buttons (\`<button data-copy="ID">\`) copy the text of
 * element ID. Allowed by its hash in the Content-Security-Policy; without it, the text is still
 * selectable with one click (user-select: all).
 */
export const COPY_SCRIPT = `document.addEventListener('click',function(e){var b=e.target.closest&&e.target.closest('button[data-copy]');if(!b)return;var t=document.getElementById(b.getAttribute('data-copy'));if(!t)return;var done=function(m){b.textContent=m;};if(navigator.clipboard){navigator.clipboard.writeText(t.textContent).then(function(){done('Copied');},function(){done('Select and copy');});}else{done('Select and copy');}});`;

/** A secret shown once, with a button that copies it. */
export function secretBox(id: string, value: string, attrs: SafeHtml = html``): SafeHtml {
  return html`<span class="secret-row"><code class="secret" id="${id}" ${attrs}>${value}</code><button type="button" class="copy" data-copy="${id}">Copy</button></span>`;
}

const STYLE = `
:root{--fg:#1a1a2e;--muted:#5b5b70;--line:#e3e3ea;--bg:#f6f6f9;--accent:#3a4fd8;--red:#b42318;
--redbg:#fef3f2;--green:#067647;--greenbg:#ecfdf3;--amber:#b54708;--amberbg:#fffaeb}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);background:var(--bg)}
header{background:var(--fg);color:#fff;display:flex;align-items:center;gap:1rem;padding:.65rem 1.5rem;flex-wrap:wrap}
header .brand{font-weight:700;letter-spacing:.02em}
header .crumb{color:#c9c9e0}
header .who{margin-left:auto;color:#c9c9e0;font-size:.9rem;display:flex;gap:.8rem;align-items:center}
header form{margin:0}
header button{background:transparent;color:#fff;border-color:#5b5b70}
.mode{font-size:.72rem;font-weight:700;padding:.1rem .55rem;border-radius:999px;text-transform:uppercase;letter-spacing:.04em}
.mode.test{background:#fdb022;color:var(--fg)}
.mode.live{background:#32d583;color:var(--fg)}
main{max-width:62rem;margin:1.5rem auto 3rem;padding:0 1.5rem}
h1{font-size:1.5rem;margin:.2rem 0 .4rem}
h2{font-size:1.15rem;margin:2rem 0 .5rem}
p.lead{color:var(--muted);margin:.2rem 0 1rem}
a{color:var(--accent)}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.88em}
.card>label.field:first-of-type{margin-top:0}
.card{background:#fff;border:1px solid var(--line);border-radius:10px;padding:1rem 1.2rem;margin:.8rem 0}
.card.unhealthy{border-color:#fda29b;box-shadow:inset 4px 0 0 var(--red)}
.card.disabled{background:#fafafb}
.row{display:flex;flex-wrap:wrap;align-items:center;gap:.5rem}
.url{font:600 .95rem ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;word-break:break-all}
.badge{font-size:.72rem;font-weight:700;padding:.1rem .55rem;border-radius:999px;text-transform:uppercase;letter-spacing:.04em}
.badge.enabled,.badge.succeeded{background:var(--greenbg);color:var(--green)}
.badge.unhealthy,.badge.failed{background:var(--redbg);color:var(--red)}
.badge.disabled,.badge.skipped,.badge.unknown{background:#f2f4f7;color:#475467}
.badge.pending{background:var(--amberbg);color:var(--amber)}
.chip{font:.8rem ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#eef0fb;color:#2d3a8c;padding:.05rem .45rem;border-radius:4px}
.meta{color:var(--muted);font-size:.88rem;margin:.35rem 0}
.note{border-radius:6px;padding:.5rem .75rem;margin:.6rem 0;font-size:.9rem}
.note.bad{background:var(--redbg);color:var(--red)}
.note.warn{background:var(--amberbg);color:var(--amber)}
.note.off{background:#f2f4f7;color:#475467}
.actions{display:flex;flex-wrap:wrap;gap:.45rem;margin-top:.8rem;align-items:center}
.actions form{margin:0}
button{font:inherit;font-size:.88rem;padding:.3rem .85rem;border-radius:6px;border:1px solid #d0d5dd;background:#fff;color:var(--fg);cursor:pointer}
button:hover{border-color:#98a2b3}
button.primary{background:var(--accent);border-color:var(--accent);color:#fff}
button.danger{color:var(--red);border-color:#fda29b}
details{display:inline-block}
details.card{display:block}
details.card summary{color:var(--accent)}
details summary{cursor:pointer;color:var(--red);font-size:.88rem;padding:.3rem .2rem}
details form{display:inline-block;margin-left:.4rem}
.flash{padding:.75rem 1rem;border-radius:8px;margin:1rem 0;border:1px solid}
.flash.ok{background:var(--greenbg);border-color:#abefc6;color:var(--green)}
.flash.error{background:var(--redbg);border-color:#fecdca;color:var(--red)}
.secret{display:block;margin-top:.45rem;font:600 .95rem ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#fff;color:var(--fg);border:1px dashed #98a2b3;padding:.45rem .65rem;border-radius:6px;word-break:break-all;user-select:all}
label.field{display:block;font-weight:600;margin:.9rem 0 .3rem}
input[type=url],input[type=text],input[type=password],input[type=email]{width:100%;font:inherit;padding:.45rem .6rem;border:1px solid #d0d5dd;border-radius:6px;background:#fff}
fieldset{border:0;padding:0;margin:.9rem 0 0}
legend{font-weight:600;padding:0;margin-bottom:.3rem}
.events{display:grid;grid-template-columns:repeat(auto-fill,minmax(12.5rem,1fr));gap:.15rem .8rem}
.events label{display:flex;gap:.4rem;align-items:center;font-size:.92rem}
.submit{margin-top:1rem}
table{width:100%;border-collapse:collapse;font-size:.86rem;margin-top:.6rem}
th,td{text-align:left;padding:.35rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}
th{color:var(--muted);font-weight:600}
td.excerpt{max-width:18rem;word-break:break-all}
.empty{color:var(--muted);font-style:italic}
.login{max-width:28rem;margin:3rem auto}
header nav{display:flex;gap:.9rem;flex-wrap:wrap}
header nav a,header a.brand{color:#fff;text-decoration:none}
header nav a[aria-current=page]{text-decoration:underline;text-underline-offset:.3em}
.modeform{margin:0}
.modenote{font-size:.8rem;color:#c9c9e0}
.skip{position:absolute;left:-999px}
.skip:focus{left:.5rem;top:.5rem;background:#fff;padding:.3rem .6rem;z-index:1}
a:focus-visible,button:focus-visible,input:focus-visible,select:focus-visible,summary:focus-visible{outline:3px solid #fdb022;outline-offset:2px}
.secret-row{display:flex;gap:.4rem;align-items:center;margin-top:.45rem}
.secret-row .secret{margin-top:0;flex:1}
.scroll{overflow-x:auto}
select{font:inherit;padding:.35rem .5rem;border:1px solid #d0d5dd;border-radius:6px;background:#fff}
pre.json{background:#fff;border:1px solid var(--line);border-radius:8px;padding:.8rem;overflow:auto;max-height:28rem;font-size:.82rem}
.stats{display:flex;gap:1.5rem;flex-wrap:wrap;margin:.6rem 0}
.stats div{min-width:6rem}
.stats strong{display:block;font-size:1.3rem}
svg.chart{width:100%;height:auto;max-width:46rem}
@media (max-width:40rem){main{padding:0 .8rem}header{padding:.6rem .8rem}header .who{margin-left:0}th,td{padding:.3rem}}
`;

const NAV: Array<[string, string]> = [
  ['Webhooks', SETTINGS],
  ['Events', EVENTS],
  ['API keys', KEYS],
];

/** The test/live switch: owners flip it; a key's session shows why it cannot. */
function modeSwitch(viewer: Viewer): SafeHtml {
  const mode = viewer.livemode ? 'live' : 'test';
  const badge = html`<span class="mode ${mode}" id="mode" data-mode="${mode}">${viewer.livemode ? 'Live mode' : 'Test mode'}</span>`;
  if (!viewer.owner) {
    return html`${badge}<span class="modenote" title="Sign in with e-mail and password, or with a ${
      viewer.livemode ? 'test' : 'live'
    } secret key, to see the other mode">set by your key</span>`;
  }
  return html`${badge}<form method="post" action="${BASE}/mode" class="modeform">${csrfField(viewer)}
<input type="hidden" name="livemode" value="${viewer.livemode ? 'false' : 'true'}"><input type="hidden" name="back" value="${viewer.path}">
<button type="submit" id="switch-mode">Switch to ${viewer.livemode ? 'test' : 'live'} mode</button></form>`;
}

export function layout(title: string, body: SafeHtml, viewer?: Viewer): string {
  const header = viewer
    ? html`<header><a class="brand" href="${SETTINGS}">mcs</a>
<nav aria-label="Dashboard">${NAV.map(
        ([label, href]) =>
          html`<a href="${href}"${viewer.path === href || viewer.path.startsWith(`${href}/`) ? html` aria-current="page"` : ''}>${label}</a>`,
      )}</nav>
${modeSwitch(viewer)}
<span class="who"><span>${viewer.email ?? viewer.accountId} · <span class="mono">${viewer.accountId}</span></span>
<form method="post" action="${BASE}/logout">${csrfField(viewer)}<button type="submit" id="sign-out">Sign out</button></form></span></header>`
    : html`<header><span class="brand">mcs</span><span class="crumb">Dashboard</span></header>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<style>${STYLE}</style></head>
<body><a class="skip" href="#main">Skip to content</a>${header}<main id="main">${body}</main><script>${COPY_SCRIPT}</script></body></html>`;
}

export const csrfField = (viewer: Viewer) => html`<input type="hidden" name="csrf" value="${viewer.csrf}">`;

/**
 * The "Events to send" checkboxes of the add and edit forms: `*` (every resource event) first,
 * then each subscribable type; `chosen` are checked.
 */
export function eventsFieldset(eventTypes: readonly string[], chosen: ReadonlySet<string>): SafeHtml {
  return html`<fieldset><legend>Events to send</legend><div class="events">
${['*', ...eventTypes].map(
  (t) =>
    html`<label><input type="checkbox" name="events" value="${t}"${chosen.has(t) ? ' checked' : ''}> ${
      t === '*' ? html`<span><code>*</code> all resource events</span>` : html`<code>${t}</code>`
    }</label>`,
)}
</div></fieldset>`;
}

export function postButton(viewer: Viewer, action: string, label: string, cls = ''): SafeHtml {
  return html`<form method="post" action="${action}">${csrfField(viewer)}<button type="submit"${
    cls ? html` class="${cls}"` : ''
  }>${label}</button></form>`;
}

export function time(d: Date | null): SafeHtml {
  if (!d) return html`—`;
  const iso = d.toISOString();
  return html`<time datetime="${iso}">${iso.slice(0, 19).replace('T', ' ')} UTC</time>`;
}

export function flashBox(flash: Flash | undefined): SafeHtml {
  if (!flash) return html``;
  const secret = flash.secret
    ? html`<br>Signing secret of <span class="mono">${flash.secret.endpoint}</span> — copy it now, it is
shown only this once:${secretBox('new-secret', flash.secret.value, html`data-endpoint="${flash.secret.endpoint}"`)}`
    : '';
  const key = flash.key
    ? html`<br>Copy the key now: it is shown only this once and stored only as a hash.${secretBox(
        'new-key',
        flash.key.value,
        html`data-key="${flash.key.id}"`,
      )}`
    : '';
  return html`<div class="flash ${flash.kind}" role="${flash.kind === 'error' ? 'alert' : 'status'}">${flash.text}${secret}${key}</div>`;
}

export const STATUS_LABEL: Record<EndpointStatus, string> = {
  enabled: 'Enabled',
  unhealthy: 'Unhealthy',
  disabled: 'Disabled',
  unknown: 'Unknown',
};

export function attemptsTable(attempts: AttemptView[]): SafeHtml {
  if (attempts.length === 0) return html`<p class="meta">No attempts.</p>`;
  return html`<div class="scroll"><table><thead><tr><th>#</th><th>Time</th><th>Result</th><th>Latency</th><th>Response</th></tr></thead>
<tbody>${attempts.map(
    (a) =>
      html`<tr class="attempt"><td>${a.number}</td><td>${time(a.at)}</td><td>${
        a.error
          ? html`<span class="badge failed">${a.error}</span>`
          : html`<span class="badge succeeded">HTTP ${a.statusCode ?? ''}</span>`
      }</td><td>${a.latencyMs} ms</td><td class="excerpt mono">${a.responseExcerpt ?? ''}</td></tr>`,
  )}</tbody></table></div>`;
}

/** One delivery with its attempts; `resend` is the POST that sends it again. */
/** A delivery with its attempts; `resend` is null where it cannot be resent (its endpoint is deleted). */
export function deliveryCard(
  viewer: Viewer,
  d: DeliveryView,
  title: SafeHtml,
  resend: string | null,
): SafeHtml {
  return html`<article class="card delivery ${d.status}" id="${d.id}" data-status="${d.status}">
<div class="row">${title}<span class="badge ${d.status}">${d.status}</span></div>
<p class="meta"><span class="mono">${d.id}</span> · created ${time(d.createdAt)} · ${d.attemptCount}
attempt${d.attemptCount === 1 ? '' : 's'}${d.nextAttemptAt ? html` · next attempt ${time(d.nextAttemptAt)}` : ''}</p>
${attemptsTable(d.attempts)}
${resend !== null && d.status !== 'pending' ? html`<div class="actions">${postButton(viewer, resend, 'Resend now')}</div>` : ''}
</article>`;
}

export function messagePage(title: string, text: string, viewer?: Viewer): string {
  const body = html`<h1>${title}</h1><p>${text}</p><p><a href="${SETTINGS}">Back to Settings → API</a></p>`;
  return layout(`${title} · mcs`, body, viewer);
}
