#!/usr/bin/env python3
"""A minimal streaming reference client, to hold the load client's envelopes against.

    bench/refclient.py URL ADMIN_URL RATE SECONDS REUSE(on|off) OUT.json [MODEL]

Sends streamed /v1/completions requests (16 prompt tokens, 8 out) at a constant RATE for SECONDS,
open model, on asyncio over raw sockets: a kept-alive connection taken from its own idle list
(REUSE on) or a fresh connection per request with "Connection: close" (off). Each request carries a
W3C traceparent; afterwards the proxy's record of each is read from ADMIN_URL
(/admin/records/{trace id}) and the envelopes are taken per request, as the load client takes them:
ttft_envelope = client TTFT - server_ttft, network_envelope = client total - server root. Its own
times run from the moment it starts the request (connect or send), not from the schedule: what this
client measures is the path, not its own lateness. transport_setup is the connect (0 on a reused
connection). Python's collector is off while sending.

OUT gets the quantiles (p50, p99, n) of each figure; a line goes to standard output.
"""
import asyncio
import gc
import json
import math
import os
import sys
import time
import urllib.request

CLOCK = time.perf_counter_ns


def quantiles(values):
    s = sorted(values)
    n = len(s)
    if n == 0:
        return {"p50_ms": None, "p99_ms": None, "n": 0}

    def q(p):  # nearest rank, as bench/report.py
        return s[max(0, math.ceil(p * n) - 1)]

    return {"p50_ms": round(q(0.5), 4), "p99_ms": round(q(0.99), 4), "n": n}


class Client:
    def __init__(self, host, port, reuse, model):
        self.host, self.port, self.reuse = host, port, reuse
        self.idle = []
        body = json.dumps({"model": model, "prompt": list(range(100, 116)), "max_tokens": 8,
                           "min_tokens": 8, "ignore_eos": True, "stream": True}).encode()
        self.body = body
        self.results = []

    def request_bytes(self, traceparent):
        head = (f"POST /v1/completions HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
                f"traceparent: {traceparent}\r\nContent-Length: {len(self.body)}\r\n")
        if not self.reuse:
            head += "Connection: close\r\n"
        return (head + "\r\n").encode() + self.body

    async def one(self, trace_id):
        t0 = CLOCK()
        conn = self.idle.pop() if self.reuse and self.idle else None
        setup = 0
        if conn is None:
            conn = await asyncio.open_connection(self.host, self.port)
            setup = CLOCK() - t0
        reader, writer = conn
        span = os.urandom(8).hex()
        writer.write(self.request_bytes(f"00-{trace_id}-{span}-01"))
        first = None
        head = await reader.readuntil(b"\r\n\r\n")
        keep = self.reuse and b"connection: close" not in head.lower()
        # Chunked body: size line, data, CRLF; the first data chunk with a non-empty "text" is the
        # first token.
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            data = await reader.readexactly(size + 2)
            if first is None and b'"text":"' in data and b'"text":""' not in data:
                first = CLOCK()
        end = CLOCK()
        if keep:
            self.idle.append(conn)
        else:
            writer.close()
        self.results.append((trace_id, setup, (first or end) - t0, end - t0))


async def run(url, rate, secs, reuse, model):
    host, port = url.split("//", 1)[1].rstrip("/").split(":")
    c = Client(host, int(port), reuse, model)
    prefix = os.urandom(8).hex()
    gap = 1e9 / rate
    start = CLOCK() + 50_000_000
    n = int(secs * rate)
    tasks = []
    loop = asyncio.get_running_loop()
    for i in range(n):
        due = start + int(i * gap)
        wait = (due - CLOCK()) / 1e9
        if wait > 0:
            await asyncio.sleep(wait)
        tasks.append(loop.create_task(c.one(prefix + f"{i:016x}")))
    await asyncio.gather(*tasks, return_exceptions=True)
    for r, w in c.idle:
        w.close()
    return c.results


def record(admin, trace_id):
    try:
        with urllib.request.urlopen(f"{admin}/admin/records/{trace_id}", timeout=5) as r:
            return json.load(r)
    except Exception:
        return None


def main():
    url, admin, rate, secs, reuse, out = sys.argv[1:7]
    model = sys.argv[7] if len(sys.argv) > 7 else "sim-llama"
    gc.disable()
    results = asyncio.run(run(url, float(rate), float(secs), reuse == "on", model))
    gc.enable()
    time.sleep(0.5)  # the proxy's last records
    ttft_env, net_env, setup, server_ttft = [], [], [], []
    for trace_id, s, ttft, total in results:
        rec = record(admin, trace_id)
        if not rec or rec.get("server_ttft_ms") is None:
            continue
        ttft_env.append(ttft / 1e6 - rec["server_ttft_ms"])
        net_env.append(total / 1e6 - rec["root_ms"])
        setup.append(s / 1e6)
        server_ttft.append(rec["server_ttft_ms"])
    summary = {"client": "refclient.py", "rate": float(rate), "reuse": reuse,
               "sent": int(float(secs) * float(rate)), "done": len(results),
               "ttft_envelope": quantiles(ttft_env), "network_envelope": quantiles(net_env),
               "transport_setup": quantiles(setup), "server_ttft": quantiles(server_ttft)}
    with open(out, "w") as f:
        json.dump(summary, f, indent=1)
    print(f"refclient {rate}/s reuse {reuse}: ttft_envelope p50 "
          f"{summary['ttft_envelope']['p50_ms']} p99 {summary['ttft_envelope']['p99_ms']}, "
          f"network_envelope p50 {summary['network_envelope']['p50_ms']}, transport_setup p50 "
          f"{summary['transport_setup']['p50_ms']} (joined {len(ttft_env)} of {len(results)})")


if __name__ == "__main__":
    main()
