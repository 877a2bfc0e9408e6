// The HTML shared by every /docs page: escaping, the layout with its navigation, code blocks.

export const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** Escapes, then renders `code` spans. */
export const inline = (s: string) => escapeHtml(s).replace(/`([^`]+)`/g, '<code>$1</code>');

export function codeBlock(code: string, lang = '', attrs = ''): string {
  return `<pre${attrs}><code${lang ? ` class="language-${lang}"` : ''}>${escapeHtml(code)}</code></pre>`;
}

export const json = (value: unknown) => JSON.stringify(value, null, 2);

export interface NavEntry {
  href: string;
  label: string;
  children?: NavEntry[];
}

const STYLE = `*{box-sizing:border-box}body{font:15px/1.55 system-ui,sans-serif;margin:0;color:#1a1a2e;display:flex}
nav{width:17rem;flex:none;height:100vh;position:sticky;top:0;overflow:auto;padding:1rem;background:#f6f6fa;border-right:1px solid #ddd;font-size:14px}
nav ul{list-style:none;padding-left:.8rem;margin:.2rem 0}nav>ul{padding:0}nav a{color:#223;text-decoration:none}nav a:hover{text-decoration:underline}
nav .here>a{font-weight:600}main{flex:1;min-width:0;max-width:60rem;padding:1rem 2rem 4rem}
code{background:#f1f1f6;padding:.05rem .3rem;border-radius:4px;font-size:.92em}pre{background:#1e1e2e;color:#e6e6f0;padding:.8rem;border-radius:6px;overflow:auto}
pre code{background:none;padding:0;color:inherit}table{border-collapse:collapse;width:100%;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f6f6fa}section.op,section.schema,section.event{border-top:1px solid #ddd;padding:.4rem 0 1rem}.meta{color:#555}
.method{display:inline-block;min-width:4.2rem;font-weight:700}.req{color:#b00;font-weight:600}.tag{font-size:.8em;background:#eef;padding:0 .3rem;border-radius:3px}
h2{margin-top:2rem}h3 code,h4 code{font-size:1em}`;

/** One page: navigation on the left (the current page marked), content on the right. */
export function layout(title: string, current: string, nav: NavEntry[], body: string): string {
  const list = (entries: NavEntry[]): string =>
    `<ul>${entries
      .map(
        (e) =>
          `<li${e.href === current ? ' class="here"' : ''}><a href="${escapeHtml(e.href)}">${escapeHtml(e.label)}</a>${
            e.children?.length ? list(e.children) : ''
          }</li>`,
      )
      .join('')}</ul>`;
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)} · mcs API</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>${STYLE}</style></head>
<body><nav aria-label="Documentation">${list(nav)}</nav><main>${body}</main></body></html>`;
}
