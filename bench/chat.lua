-- wrk script: every request is the same small non-streamed chat completion.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"model":"sim-llama","messages":[{"role":"user","content":"Say eight words."}],"max_tokens":8,"stream":false}'
