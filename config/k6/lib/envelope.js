// Phasemeter's envelope arithmetic for k6, kept free of k6 imports so that the tests run it under
// Node.js on responses recorded from a real proxy (proxy/src/test/.../K6EnvelopeTest.java).
//
// The proxy's Server-Timing header (docs/design.md §5) lists the phases it measured, in milliseconds on
// its own monotonic clock. k6 measured the whole request on its clock. Only durations are
// subtracted, never timestamps from two machines, and per request, before any quantile.

/** The phases a non-streamed response's Server-Timing carries. */
export const SERVER_TIMING_PHASES = ['auth', 'receive', 'prepare', 'route', 'queue', 'generation'];

/** Budget phase -> the k6 Trend that measures it (phases k6 cannot observe are absent). */
export const PHASE_METRICS = {
  network_envelope: 'phasemeter_network_envelope',
  gateway: 'phasemeter_gateway',
  receive: 'phasemeter_receive',
  queue: 'phasemeter_queue',
  generation: 'phasemeter_generation',
  client_total: 'http_req_duration',
  connect: 'phasemeter_connect',
  tls: 'phasemeter_tls',
};

/**
 * The connection set-up of one request from k6's own timings (res.timings: `connecting`, the TCP
 * connect, k6's http_req_connecting; `tls_handshaking`, k6's http_req_tls_handshaking), as the
 * Phasemeter load client splits transport_setup: only a request that opened its connection has
 * them (`opened`); one on a reused connection has none (k6 reports 0 for it, which would pull the
 * quantiles of k6's own trends down), and plain http has no `tls_ms` (null).
 */
export function connectionSetup(k6Timings) {
  const connectMs = Number((k6Timings && k6Timings.connecting) || 0);
  const tlsMs = Number((k6Timings && k6Timings.tls_handshaking) || 0);
  const opened = connectMs > 0 || tlsMs > 0;
  return {
    opened,
    connect_ms: opened ? connectMs : null,
    tls_ms: opened && tlsMs > 0 ? tlsMs : null,
  };
}

/** Parses `auth;dur=0.26, queue;dur=12.5` into {auth: 0.26, queue: 12.5}; unknown params ignored. */
export function parseServerTiming(header) {
  const out = {};
  if (!header) {
    return out;
  }
  for (const entry of String(header).split(',')) {
    const parts = entry.trim().split(';');
    const name = parts[0].trim();
    for (const p of parts.slice(1)) {
      const m = /^\s*dur\s*=\s*"?(-?[0-9.]+)"?\s*$/.exec(p);
      if (name && m) {
        out[name] = Number(m[1]);
      }
    }
  }
  return out;
}

/**
 * One request's figures from k6's duration and the proxy's phases. network_envelope is what k6
 * waited beyond the phases the proxy reported: the network both ways plus the proxy's `write` tail
 * and the code between spans (a fraction of a millisecond). It is never clipped: a negative value
 * is a unit or boundary error, to be counted and looked at.
 */
export function envelope(durationMs, timings) {
  const missing = SERVER_TIMING_PHASES.filter((p) => !(p in timings));
  if (missing.length > 0) {
    return { complete: false, missing };
  }
  const serverMs = SERVER_TIMING_PHASES.reduce((sum, p) => sum + timings[p], 0);
  return {
    complete: true,
    server_ms: serverMs,
    gateway_ms: timings.auth + timings.prepare + timings.route,
    network_envelope_ms: durationMs - serverMs,
    phases: timings,
  };
}

/** Lower-case hex of a Uint8Array or ArrayBuffer. */
export function hex(bytes) {
  const view = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  return Array.from(view, (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * A W3C traceparent unique per request: this generator's random 64-bit id in the high half of the
 * trace id (several k6 instances never collide) and the request counter in the low half, as the
 * Phasemeter load client does. Sampled flag set.
 */
export function traceparent(generatorHex, counter) {
  if (!/^[0-9a-f]{16}$/.test(generatorHex) || /^0+$/.test(generatorHex)) {
    throw new Error(`generator id must be 16 hex digits, not all zero: ${generatorHex}`);
  }
  // k6's JavaScript engine (goja) has no BigInt: the counter stays a Number, exact up to 2^53 - 1.
  if (!Number.isSafeInteger(counter) || counter < 0) {
    throw new Error(`request counter must be an integer from 0 to 2^53 - 1: ${counter}`);
  }
  const low = counter.toString(16).padStart(16, '0');
  const span = (counter + 1).toString(16).padStart(16, '0');
  return `00-${generatorHex}${low}-${span}-01`;
}

/** The trace id inside a traceparent. */
export function traceIdOf(tp) {
  return tp.split('-')[1];
}

/** Whether a request is worth printing: failed, or slower than slowMs. Only those are printed. */
export function shouldReport(status, durationMs, slowMs) {
  return status !== 200 || durationMs > slowMs;
}

/**
 * Reads config/budgets.yaml. Only the subset that file uses is understood: a `budgets:` list of
 * maps whose values are scalars or one-line flow maps (`limits_ms: {queue: 250, ...}`); comments
 * and blank lines are skipped. Anything else is an error rather than a silent misreading.
 */
export function parseBudgets(text) {
  const budgets = [];
  let current = null;
  let inList = false;
  for (const raw of String(text).split(/\r?\n/)) {
    const line = stripComment(raw);
    if (line.trim() === '') {
      continue;
    }
    if (/^budgets:\s*$/.test(line)) {
      inList = true;
      continue;
    }
    if (!inList) {
      throw new Error(`budgets file: expected 'budgets:' first, got: ${raw.trim()}`);
    }
    const item = /^\s*-\s+(.*)$/.exec(line);
    const body = item ? item[1] : line.trim();
    if (item) {
      current = {};
      budgets.push(current);
    }
    if (current === null) {
      throw new Error(`budgets file: a key outside a list item: ${raw.trim()}`);
    }
    const kv = /^([A-Za-z_][A-Za-z0-9_]*):\s*(.*)$/.exec(body);
    if (!kv) {
      throw new Error(`budgets file: cannot read: ${raw.trim()}`);
    }
    current[kv[1]] = value(kv[2]);
  }
  return budgets.map((b) => ({
    name: String(b.name),
    model: b.model === undefined ? '*' : String(b.model),
    quantile: b.quantile === undefined ? 0.95 : Number(b.quantile),
    limits_ms: b.limits_ms || {},
    max_error_rate: b.max_error_rate === undefined ? null : Number(b.max_error_rate),
  }));
}

function stripComment(line) {
  let quote = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      if (c === quote) quote = null;
    } else if (c === '"' || c === "'") {
      quote = c;
    } else if (c === '#' && (i === 0 || /\s/.test(line[i - 1]))) {
      return line.slice(0, i);
    }
  }
  return line;
}

function value(text) {
  const t = text.trim();
  if (t.startsWith('{')) {
    if (!t.endsWith('}')) {
      throw new Error(`budgets file: a flow map must fit on one line: ${t}`);
    }
    const out = {};
    const inner = t.slice(1, -1).trim();
    if (inner === '') {
      return out;
    }
    for (const pair of inner.split(',')) {
      const m = /^\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.+?)\s*$/.exec(pair);
      if (!m) {
        throw new Error(`budgets file: cannot read '${pair}' in ${t}`);
      }
      out[m[1]] = value(m[2]);
    }
    return out;
  }
  if (/^".*"$/.test(t) || /^'.*'$/.test(t)) {
    return t.slice(1, -1);
  }
  if (/^-?[0-9]+(\.[0-9]+)?([eE]-?[0-9]+)?$/.test(t)) {
    return Number(t);
  }
  return t;
}

/** `p(95)` for 0.95, `p(99.9)` for 0.999: k6's percentile aggregation names. */
export function percentile(quantile) {
  return `p(${Number((quantile * 100).toFixed(6))})`;
}

/**
 * k6 thresholds from the budgets that apply to `model`: one per budgeted phase that k6 can observe
 * (PHASE_METRICS), at the budget's quantile; the error-rate budget on http_req_failed. Phases only
 * the proxy sees (ttft, total, tpot, itl, write, unattributed) are returned in `skipped`: the proxy
 * judges them live (llm_budget_ratio) and the generated Prometheus rules alert on them.
 */
export function thresholdsFor(budgets, model) {
  const thresholds = {};
  const skipped = [];
  const add = (metric, expr) => {
    (thresholds[metric] = thresholds[metric] || []).push(expr);
  };
  for (const b of budgets) {
    if (b.model !== '*' && b.model !== model) {
      continue;
    }
    for (const [phase, limit] of Object.entries(b.limits_ms)) {
      const metric = PHASE_METRICS[phase];
      if (metric) {
        add(metric, `${percentile(b.quantile)}<${limit}`);
      } else {
        skipped.push(`${b.name}:${phase}`);
      }
    }
    if (b.max_error_rate !== null) {
      add('http_req_failed', `rate<${b.max_error_rate}`);
    }
  }
  return { thresholds, skipped };
}
