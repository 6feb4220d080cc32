// Runs config/k6/lib/envelope.js under Node.js on responses recorded from a real proxy, the way
// config/k6/phase-envelope.js uses it under k6. Usage: node mirror.mjs ENVELOPE_JS INPUT_JSON
// Prints one JSON object; K6EnvelopeTest checks it against the proxy's own records.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const [envelopeJs, inputJson] = process.argv.slice(2);
const lib = await import(pathToFileURL(envelopeJs).href);
const input = JSON.parse(readFileSync(inputJson, 'utf8'));

const results = input.responses.map((r) => ({
  trace_id: lib.traceIdOf(r.traceparent),
  report: lib.shouldReport(r.status, r.duration_ms, input.slow_ms),
  ...lib.envelope(r.duration_ms, lib.parseServerTiming(r.server_timing)),
}));
const budgets = lib.parseBudgets(readFileSync(input.budgets_file, 'utf8'));
const judged = lib.thresholdsFor(budgets, input.model);
const traceparents = input.counters.map((n) => lib.traceparent(input.generator, n));
let badGenerator = null;
try {
  lib.traceparent('0000000000000000', 1);
} catch (e) {
  badGenerator = e.message;
}
// k6 has no BigInt: counters are Numbers, exact to 2^53 - 1; beyond that they are refused.
let badCounter = null;
try {
  lib.traceparent(input.generator, 2 ** 53);
} catch (e) {
  badCounter = e.message;
}
console.log(
  JSON.stringify({
    results,
    budgets,
    thresholds: judged.thresholds,
    skipped: judged.skipped,
    traceparents,
    bad_generator: badGenerator,
    bad_counter: badCounter,
    percentiles: [0.5, 0.95, 0.999].map(lib.percentile),
    timing_with_desc: lib.parseServerTiming('queue;desc="slot wait";dur=12.5, cache;desc=hit'),
    // k6's res.timings of a request that opened a TLS connection, one on plain http, a reused one.
    setup: [
      { connecting: 0.21, tls_handshaking: 3.5, duration: 9 },
      { connecting: 0.3, tls_handshaking: 0, duration: 9 },
      { connecting: 0, tls_handshaking: 0, duration: 9 },
    ].map(lib.connectionSetup),
  }),
);
