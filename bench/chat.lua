-- wrk script: every request is the same small non-streamed chat completion, from tenant bench-a
-- (the header bench/run allowlists on a proxy that has tenants; any other proxy just forwards it).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["x-tenant-id"] = "bench-a"
wrk.body = '{"model":"sim-llama","messages":[{"role":"user","content":"Say eight words."}],"max_tokens":8,"stream":false}'
