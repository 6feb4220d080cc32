// Phasemeter with k6: open-model load through the proxy, the per-request network envelope computed
// in k6 from the proxy's Server-Timing header, and thresholds per phase from config/budgets.yaml.
//
//   k6 run -e BASE_URL=http://127.0.0.1:8080 -e MODEL=sim-llama -e RATE=5 -e DURATION=2m \
//     config/k6/phase-envelope.js
//
// Environment: BASE_URL, MODEL, RATE (requests/s), DURATION, MAX_TOKENS (default 64), SLOW_MS
// (requests slower than this are printed with their trace id; default 2000), BUDGETS (absolute, or
// relative to this script's directory, not to the working directory; default ../budgets.yaml),
// NO_REUSE (1: a fresh connection per request, k6's noConnectionReuse, as `phasemeter load
// --connection-reuse off`; needed against a server that closes kept-alive connections after the
// responses this script asks for, or k6 reuses a closed connection and the request fails: k6 does
// not retry. llama.cpp's server closes after a stream, not after the whole responses sent here, and
// the proxy keeps client connections open whatever its upstream does).
//
// Every request's trace id rides on its samples as k6 metadata (not a tag: no extra time series):
// `k6 run --out json=run.json` writes it beside each request's http_req_duration and phasemeter_*
// values, so a run can be looked up request by request in the proxy (/admin/records/<trace_id>).
//
// Requests are not streamed: a streamed response's Server-Timing can only carry the phases before
// its first byte (docs/design.md §5). For streamed load and TTFT envelopes use `phasemeter load run`.
import http from 'k6/http';
import exec from 'k6/execution';
import { randomBytes } from 'k6/crypto';
import { Counter, Trend } from 'k6/metrics';
import {
  PHASE_METRICS,
  connectionSetup,
  envelope,
  hex,
  parseBudgets,
  parseServerTiming,
  shouldReport,
  thresholdsFor,
  traceIdOf,
  traceparent,
} from './lib/envelope.js';

const BASE_URL = (__ENV.BASE_URL || 'http://127.0.0.1:8080').replace(/\/+$/, '');
const MODEL = __ENV.MODEL || 'sim-llama';
const RATE = Number(__ENV.RATE || 5);
const DURATION = __ENV.DURATION || '1m';
const MAX_TOKENS = Number(__ENV.MAX_TOKENS || 64);
const SLOW_MS = Number(__ENV.SLOW_MS || 2000);
const NO_REUSE = ['1', 'true', 'on', 'yes'].includes(String(__ENV.NO_REUSE || '').toLowerCase());

// One file feeds the proxy, the load client, the Prometheus rules and this script.
const budgets = parseBudgets(open(__ENV.BUDGETS || '../budgets.yaml'));
const judged = thresholdsFor(budgets, MODEL);

export const options = {
  scenarios: {
    phases: {
      // Open model: requests start on schedule whatever the responses do; k6 counts the
      // iterations it could not start (dropped_iterations) instead of slowing down.
      executor: 'constant-arrival-rate',
      rate: RATE,
      timeUnit: '1s',
      duration: DURATION,
      preAllocatedVUs: Math.max(10, Math.ceil(RATE * 4)),
      maxVUs: Math.max(50, Math.ceil(RATE * 60)),
    },
  },
  // Two thresholds beside the budgets: a phase Trend with no samples passes its threshold in k6, so
  // a run whose responses carried no Server-Timing (not the proxy, or a hop that strips the header)
  // would pass every envelope budget on nothing, and one such response fails the run instead; and
  // an open model that could not start an iteration on time did not generate the promised load, so
  // a dropped iteration fails it too (as `phasemeter load run` exits 4 on drops).
  thresholds: Object.assign(
    { phasemeter_missing_server_timing: ['count<1'], dropped_iterations: ['count<1'] },
    judged.thresholds,
  ),
  // Low-cardinality tags only: no url (it is one), no trace id, no request id. proto and
  // tls_version say what k6 negotiated (HTTP/2.0 by ALPN over https, tls1.3).
  systemTags: [
    'status',
    'method',
    'name',
    'scenario',
    'expected_response',
    'error_code',
    'proto',
    'tls_version',
  ],
  discardResponseBodies: true,
  noConnectionReuse: NO_REUSE,
};

// Time trends (milliseconds), one per phase k6 can observe.
const trends = {};
for (const metric of Object.values(PHASE_METRICS)) {
  if (metric.startsWith('phasemeter_')) {
    trends[metric] = new Trend(metric, true);
  }
}
const missingTiming = new Counter('phasemeter_missing_server_timing');
const negativeEnvelopes = new Counter('phasemeter_negative_envelopes');

// This VU's generator id: random, so VUs and separate k6 instances never share trace ids.
const generator = hex(randomBytes(8));

export function setup() {
  if (judged.skipped.length > 0) {
    console.log(`budgets judged by the proxy, not by k6: ${judged.skipped.join(', ')}`);
  }
}

export default function () {
  const tp = traceparent(generator, exec.scenario.iterationInTest);
  exec.vu.metrics.metadata.trace_id = traceIdOf(tp);
  const body = JSON.stringify({
    model: MODEL,
    stream: false,
    max_tokens: MAX_TOKENS,
    messages: [{ role: 'user', content: 'Summarise the theory of relativity in one paragraph.' }],
  });
  const tags = { name: 'POST /v1/chat/completions', model: MODEL };
  const res = http.post(`${BASE_URL}/v1/chat/completions`, body, {
    headers: { 'content-type': 'application/json', traceparent: tp },
    tags,
  });
  const duration = res.timings.duration;
  // connect and tls (k6's http_req_connecting and http_req_tls_handshaking) of the requests that
  // opened a connection only; over https point k6 at a private CA with SSL_CERT_FILE=ca.pem.
  const setup = connectionSetup(res.timings);
  if (setup.opened) {
    trends.phasemeter_connect.add(setup.connect_ms, tags);
    if (setup.tls_ms !== null) {
      trends.phasemeter_tls.add(setup.tls_ms, tags);
    }
  }
  if (res.status === 200) {
    const e = envelope(duration, parseServerTiming(res.headers['Server-Timing']));
    if (!e.complete) {
      missingTiming.add(1, tags);
    } else {
      trends.phasemeter_network_envelope.add(e.network_envelope_ms, tags);
      trends.phasemeter_gateway.add(e.gateway_ms, tags);
      trends.phasemeter_receive.add(e.phases.receive, tags);
      trends.phasemeter_queue.add(e.phases.queue, tags);
      trends.phasemeter_generation.add(e.phases.generation, tags);
      if (e.network_envelope_ms < 0) {
        negativeEnvelopes.add(1, tags);
      }
    }
  }
  if (shouldReport(res.status, duration, SLOW_MS)) {
    // Only slow or failed requests, each with the id to look up in the proxy or the trace store:
    //   curl localhost:9464/admin/records/<trace_id>
    console.warn(
      `status=${res.status} duration_ms=${duration.toFixed(1)} trace_id=${traceIdOf(tp)}`,
    );
  }
}
