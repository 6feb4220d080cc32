#!/usr/bin/env python3
"""A minimal streaming client: TTFT to an engine directly and through a proxy, in interleaved rounds.

    bench/enginettft.py --direct HOST:PORT --proxy HOST:PORT [--model M] [--rounds R]
                        [--per-round N] [--rate closed|REQ_PER_S] [--warmup W] [--json OUT]
                        [--warm-proxy-s S] [--warm-proxy-max M]

Every request goes on a fresh TCP connection (connect, one streamed /v1/completions, read to
[DONE], close), as a client that does not keep connections would; its TTFT runs from before the
connect to the first data event that carries text, read from a blocking socket with TCP_NODELAY,
so that nothing of a client library's own is counted. Each round sends N requests to one target
then N to the other (the order alternates per round); `closed` sends each as soon as the last one
ended (concurrency 1), a rate spaces the sends evenly (a send that would be late goes at once).
Each round's added TTFT is the proxy's p50 minus the direct p50; the median over rounds is the
figure (docs/performance.md, "Engine reuse"). Python's collector is off while measuring.

Before anything is counted the proxy's own request path is warmed, so that the rounds do not time
a JVM still running it interpreted (at a few requests per second it never leaves the interpreter):
up to M cheap requests (max_tokens 1, each on a fresh connection, back to back) for at most S
seconds, to the proxy only; then W requests of the measured kind to each target. How many warm-up
requests went is in the output.

Prints one JSON object (also written to --json): per round p50s, the median added TTFT, p90s.
"""
import argparse
import gc
import json
import socket
import statistics
import sys
import time

PROMPT = " ".join(["the quick brown fox jumps over a lazy dog"] * 4)  # ~40 tokens


def target(s):
    host, _, port = s.rpartition(":")
    return host or "127.0.0.1", int(port)


def request_bytes(host, model, max_tokens, extra_headers, n=0):
    # A number first, so that no two prompts share a prefix: the engine's prompt cache would make
    # the prefill of a repeated prompt almost nothing.
    body = json.dumps({"model": model, "prompt": f"{n} {PROMPT}", "max_tokens": max_tokens,
                       "stream": True, "ignore_eos": True, "temperature": 0}).encode()
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: {host}\r\n"
            f"Content-Type: application/json\r\nAccept: text/event-stream\r\n{extra_headers}"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    return head + body


def one(addr, req, clock):
    """Returns (ttft_ns, connect_ns, total_ns) or raises on anything but a whole stream."""
    t0 = clock()
    s = socket.create_connection(addr, timeout=30)
    try:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        t_conn = clock()
        s.sendall(req)
        buf = b""
        first = None
        while True:
            chunk = s.recv(65536)
            if not chunk:
                raise RuntimeError("connection closed before [DONE]: "
                                   + buf[:200].decode("latin-1", "replace"))
            buf += chunk
            if first is None:
                i = buf.find(b"data: {")
                if i >= 0 and buf.find(b"\n", i) > 0:
                    line = buf[i:buf.find(b"\n", i)]
                    if b'"text":"' in line and b'"text":""' not in line:
                        first = clock()
                    elif b'"text":""' in line or b'"content":""' in line:
                        buf = buf[buf.find(b"\n", i):]  # an empty opening event: keep looking
            # The whole response, to its last chunk: a client that hung up at [DONE] would be a
            # cancelled request to the proxy.
            if b"data: [DONE]" in buf and buf.endswith(b"\r\n0\r\n\r\n"):
                break
            if len(buf) > 1 << 20:
                buf = buf[-4096:]
        t_end = clock()
        if first is None:
            raise RuntimeError("no text event: " + buf[:300].decode("latin-1", "replace"))
        return first - t0, t_conn - t0, t_end - t0
    finally:
        s.close()


def p(values, q):
    v = sorted(values)
    if not v:
        return float("nan")
    k = min(len(v) - 1, max(0, int(round(q * (len(v) - 1)))))
    return v[k]


SEQ = [0]


def run_block(addr, mk, n, interval_ns, clock, errors):
    ttfts, conns = [], []
    nxt = clock()
    for _ in range(n):
        if interval_ns:
            now = clock()
            if nxt > now:
                time.sleep((nxt - now) / 1e9)
            nxt += interval_ns
        try:
            SEQ[0] += 1
            ttft, conn, _ = one(addr, mk(SEQ[0]), clock)
            ttfts.append(ttft / 1e6)
            conns.append(conn / 1e6)
        except Exception as e:  # noqa: BLE001: counted and shown, never hidden
            errors.append(str(e)[:200])
    return ttfts, conns


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--direct", required=True)
    ap.add_argument("--proxy", required=True)
    ap.add_argument("--model", default="tiny-llama")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--per-round", type=int, default=20)
    ap.add_argument("--rate", default="closed")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--json")
    ap.add_argument("--warm-proxy-s", type=float, default=0)
    ap.add_argument("--warm-proxy-max", type=int, default=3000)
    a = ap.parse_args()
    clock = time.perf_counter_ns
    direct, proxy = target(a.direct), target(a.proxy)
    reqs = {"direct": lambda n: request_bytes(direct[0], a.model, a.max_tokens, "", n),
            "proxy": lambda n: request_bytes(proxy[0], a.model, a.max_tokens, "", n)}
    addrs = {"direct": direct, "proxy": proxy}
    interval = 0 if a.rate == "closed" else int(1e9 / float(a.rate))
    errors = {"direct": [], "proxy": []}
    warmed, warm_errors, warm_from = 0, 0, clock()
    until = warm_from + int(a.warm_proxy_s * 1e9)
    cheap = lambda n: request_bytes(proxy[0], a.model, 1, "", n)  # noqa: E731
    while a.warm_proxy_s > 0 and warmed < a.warm_proxy_max and clock() < until:
        SEQ[0] += 1
        warmed += 1
        try:
            one(proxy, cheap(SEQ[0]), clock)
        except Exception:  # noqa: BLE001: counted in the output
            warm_errors += 1
    warm_s = (clock() - warm_from) / 1e9
    for name in ("direct", "proxy"):  # warm both paths (and the proxy's JIT), uncounted
        run_block(addrs[name], reqs[name], a.warmup, interval, clock, [])
    rounds = []
    gc.disable()
    try:
        for r in range(a.rounds):
            order = ("direct", "proxy") if r % 2 == 0 else ("proxy", "direct")
            got = {}
            for name in order:
                got[name] = run_block(addrs[name], reqs[name], a.per_round, interval, clock,
                                      errors[name])
            d, x = got["direct"][0], got["proxy"][0]
            rounds.append({
                "direct_p50": p(d, 0.5), "proxy_p50": p(x, 0.5),
                "added_p50": p(x, 0.5) - p(d, 0.5),
                "direct_p90": p(d, 0.9), "proxy_p90": p(x, 0.9),
                "direct_connect_p50": p(got["direct"][1], 0.5),
                "proxy_connect_p50": p(got["proxy"][1], 0.5),
                "n": [len(d), len(x)]})
            gc.collect()
    finally:
        gc.enable()
    out = {
        "rate": a.rate, "rounds": a.rounds, "per_round": a.per_round,
        "added_ttft_p50_median_ms": statistics.median(r["added_p50"] for r in rounds),
        "direct_ttft_p50_median_ms": statistics.median(r["direct_p50"] for r in rounds),
        "proxy_ttft_p50_median_ms": statistics.median(r["proxy_p50"] for r in rounds),
        "proxy_warmup": {"requests": warmed, "errors": warm_errors,
                         "seconds": round(warm_s, 1) if a.warm_proxy_s > 0 else 0},
        "errors": {k: len(v) for k, v in errors.items()},
        "first_errors": {k: v[:3] for k, v in errors.items()},
        "round_figures": rounds,
    }
    text = json.dumps(out, indent=1)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
