/**
 * URLs as subtee shows them: in warnings, errors, index.json, the pino log and the report.
 * Endpoints often carry credentials (`user:password@host`, `?token=…`, `;token=…` in a path
 * segment), and what subtee prints is copied into CI logs and shared pages, so the user part,
 * the whole query and every segment's `;` parameters (a token can hide under any name) are
 * replaced by `***`; the fragment is dropped.
 * A string that does not parse is redacted by the same rules, never echoed whole.
 */

/** What stands in for a redacted part. */
export const REDACTED = '***';

/** Longest URL shown; a longer one is cut (a URL that long is a mistake, or an attack on logs). */
const SHOWN_URL_CHARS = 300;

/**
 * The URL without its secrets: `http://u:pw@h:8123/db?password=x#f` is shown as
 * `http://***@h:8123/db?***`.
 */
export function shownUrl(url: string): string {
  let shown: string;
  try {
    const u = new URL(url);
    if (u.host === '') throw new TypeError('no host');
    if (u.username !== '' || u.password !== '') {
      u.username = REDACTED;
      u.password = '';
    }
    if (u.search !== '') u.search = REDACTED;
    if (u.pathname.includes(';')) u.pathname = withoutPathParams(u.pathname);
    u.hash = '';
    shown = u.toString();
    // `http://host:8123`, as it is usually written, not with the slash URL adds.
    if (u.pathname === '/' && u.search === '') shown = shown.slice(0, -1);
  } catch {
    shown = redactUnparsed(url);
  }
  return shown.length > SHOWN_URL_CHARS ? `${shown.slice(0, SHOWN_URL_CHARS)}…` : shown;
}

/**
 * The same rules on a string that is not a URL with a host (`user:pw@host`, `http://a b@c`):
 * everything before the last `@` of the part before any `?`/`#` (after a `scheme://`) is
 * taken for a user part.
 */
function redactUnparsed(text: string): string {
  const end = text.search(/[?#]/);
  let head = end === -1 ? text : text.slice(0, end);
  const tail = end !== -1 && text[end] === '?' ? `?${REDACTED}` : '';
  const at = head.lastIndexOf('@');
  let user = '';
  if (at !== -1) {
    const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.exec(head);
    const from = scheme && scheme[0].length <= at ? scheme[0].length : 0;
    user = `${head.slice(0, from)}${REDACTED}`;
    head = head.slice(at);
  }
  // Path parameters after the user part only: a `;` in a password must not hide its `@`.
  return user + withoutPathParams(head) + tail;
}

/** Each `;params` of a path segment as `;***` (`/v1/traces;token=x` → `/v1/traces;***`). */
function withoutPathParams(path: string): string {
  return path.replace(/;[^/]*/g, `;${REDACTED}`);
}

/**
 * `text` (an error message from a client library, say) with every copy of `url` and of its
 * secret parts replaced, so a library that quotes the URL it was given cannot leak it.
 */
export function withoutUrlSecrets(text: string, url: string): string {
  const shown = shownUrl(url);
  const copies: Array<[string, string]> = [[url, shown]];
  try {
    const u = new URL(url);
    copies.push([u.toString(), shown], [u.search.slice(1), REDACTED], [u.password, REDACTED]);
    for (const value of u.searchParams.values()) copies.push([value, REDACTED]);
    for (const params of u.pathname.match(/;[^/]*/g) ?? []) copies.push([params.slice(1), REDACTED]);
    // The user name too: it may be a token (`sk-live-…`), and a server's error quotes it.
    copies.push([u.username, REDACTED], [decodeURIComponent(u.username), REDACTED]);
    copies.push([decodeURIComponent(u.password), REDACTED]);
    // A server that echoes the request's Authorization header: HTTP Basic of the user part.
    const basic = `${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`;
    if (u.username !== '' || u.password !== '')
      copies.push([Buffer.from(basic).toString('base64'), REDACTED], [basic, REDACTED]);
  } catch {
    // Not a URL (or a password that does not decode): the copies found so far are looked for.
  }
  let out = text;
  for (const [secret, stand] of copies.sort((a, b) => b[0].length - a[0].length))
    if (secret.length >= 3) out = out.split(secret).join(stand);
  return out;
}

/** What is wrong with `url` as an http or https endpoint, or null: the check of a sink's URL option. */
export function httpUrlProblem(url: string): string | null {
  try {
    const u = new URL(url);
    if ((u.protocol === 'http:' || u.protocol === 'https:') && u.host !== '') return null;
  } catch {
    // Not a URL at all: the same answer.
  }
  return 'must be an http or https URL';
}
