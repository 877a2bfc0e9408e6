// A limit on how deep a request body's arrays and objects nest, checked before JSON.parse.
// V8's JSON.parse takes time that grows faster than the depth: a 1 MiB body of half a million
// nested arrays held the gateway's event loop — every request of every account — for about a
// second, so a few such requests in a row, within any account's rate limit, stalled the API for
// everyone. No request of the API nests deeper than 4 levels.

/** Levels of arrays and objects a request body may nest. */
export const MAX_JSON_DEPTH = 64;

/**
 * Whether the JSON text in `raw` nests arrays and objects deeper than `max`: one pass over its
 * bytes that skips strings (UTF-8 continuation bytes are never a quote, a backslash or a bracket),
 * stopping at the first level too deep. Malformed text is for JSON.parse to refuse.
 */
export function nestedDeeperThan(raw: Uint8Array, max: number = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < raw.length; i++) {
    const b = raw[i]!;
    if (inString) {
      if (b === 0x5c)
        i++; // a backslash: the next byte is escaped
      else if (b === 0x22) inString = false;
    } else if (b === 0x22) inString = true;
    else if (b === 0x5b || b === 0x7b) {
      if (++depth > max) return true;
    } else if (b === 0x5d || b === 0x7d) depth--;
  }
  return false;
}

/** The message of the invalid_json error a body nested too deeply gets. */
export const TOO_DEEP = `The request body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep.`;
