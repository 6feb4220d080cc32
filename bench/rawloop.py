#!/usr/bin/env python3
"""One keep-alive connection, one request at a time, every latency written down uncorrected.

    bench/rawloop.py HOST PORT SECONDS OUT.txt

wrk -c1 applies a coordinated-omission correction to its latency histogram (wrk.c, stats_correct):
each latency longer than twice the mean interval between requests adds synthetic samples of
latency - interval, latency - 2 x interval, ..., as if a client kept sending at the closed loop's
own mean rate through a stall. Its p99 is therefore an open-model figure at the closed loop's rate
(~6,000 req/s here), not at any chosen rate. This client keeps the raw latencies instead, so that
bench/report.py can apply the same rule for a chosen arrival rate (HdrHistogram's
recordValueWithExpectedInterval): one stall of the proxy then delays rate x stall requests, as it
would in an open model at that rate.

OUT gets one latency in milliseconds per line; a summary goes to standard output. Python's own
collector is off while measuring, so that the client's pauses are not charged to the target.
"""
import gc
import math
import socket
import sys
import time

BODY = (b'{"model":"sim-llama","messages":[{"role":"user","content":"Say eight words."}],'
        b'"max_tokens":8,"stream":false}')


def main():
    host, port, secs, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: " + host.encode() + b"\r\n"
           b"Content-Type: application/json\r\nx-tenant-id: bench-a\r\n"
           b"Content-Length: " + str(len(BODY)).encode()
           + b"\r\n\r\n" + BODY)
    s = socket.create_connection((host, port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    lat = []
    buf = b""
    bad = 0
    clock = time.perf_counter_ns
    gc.disable()
    end = clock() + int(secs * 1e9)
    t0 = clock()
    while t0 < end:
        s.sendall(req)
        while True:
            i = buf.find(b"\r\n\r\n")
            if i >= 0:
                head = buf[:i]
                j = head.lower().find(b"content-length:")
                if j < 0:
                    # Chunked or close-delimited: this client would misread every later response.
                    raise SystemExit("rawloop: a response without Content-Length: "
                                     + head.split(b"\r\n")[0].decode("latin-1"))
                n = int(head[j + 15:].split(b"\r\n")[0])
                if len(buf) >= i + 4 + n:
                    if not head.startswith(b"HTTP/1.1 200"):
                        bad += 1
                    buf = buf[i + 4 + n:]
                    break
            chunk = s.recv(65536)
            if not chunk:
                raise SystemExit("rawloop: the target closed the connection")
            buf += chunk
        t1 = clock()
        lat.append(t1 - t0)
        t0 = t1
    elapsed = (t0 - (end - int(secs * 1e9))) / 1e9
    gc.enable()
    with open(out, "w") as f:
        f.write("\n".join(f"{v / 1e6:.4f}" for v in lat))
        f.write("\n")
    srt = sorted(lat)
    n = len(srt)
    def q(p):  # nearest rank, as bench/report.py
        return srt[max(0, math.ceil(p * n) - 1)] / 1e6

    print(f"requests={n} non_200={bad} rate={n / elapsed:.0f}/s p50={q(0.5):.3f}ms "
          f"p99={q(0.99):.3f}ms p99.9={q(0.999):.3f}ms max={srt[-1] / 1e6:.3f}ms")


if __name__ == "__main__":
    main()
