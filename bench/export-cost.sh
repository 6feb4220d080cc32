#!/usr/bin/env bash
# What exporting spans costs, by hand (docs/performance.md, "What exporting costs"): Phasemeter with
# full measurement and no exporter (as bench/run), exporting every request (ratio 1.0), exporting 1 %
# (ratio 0.01; errors and requests of 2 s or more kept), and telemetry off, each behind wrk -t1 -c16 in
# interleaved 8 s rounds after 30 s of warm-up; the OTLP sink is an nginx answering 200 with an empty
# ExportTraceServiceResponse. Prints req/s and CPU ticks per round, and the exporters' counters.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"; W="$(mktemp -d)"; mkdir -p "$W/tmp"; JAR=$ROOT/proxy/target/phasemeter-proxy.jar
[ -f "$JAR" ] || { echo "build first: ./mvnw -q -B package -DskipTests" >&2; exit 1; }
command -v wrk > /dev/null && command -v nginx > /dev/null || { echo "needs wrk and nginx (apt-get install -y wrk nginx)" >&2; exit 1; }
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
PIDS=(); trap 'kill ${PIDS[@]} 2>/dev/null || true; rm -rf "$W"' EXIT
STUB=$(free_port); SINK=$(free_port)
sed -e "s|@DIR@|$W|g" -e "s|@PORT@|$STUB|g" $ROOT/bench/nginx/stub.conf.template > $W/stub.conf
cat > $W/sink.conf <<CONF
worker_processes 1; pid $W/sink.pid; error_log stderr warn;
events { worker_connections 1024; }
http { access_log off; client_body_temp_path $W/tmp; client_max_body_size 64m;
  server { listen 127.0.0.1:$SINK; location / { default_type application/x-protobuf; return 200 ''; } } }
CONF
nginx -p $W -c $W/stub.conf -g 'daemon off;' > $W/stub.log 2>&1 & PIDS+=($!)
nginx -p $W -c $W/sink.conf -g 'daemon off;' > $W/sink.log 2>&1 & PIDS+=($!)
declare -A PORT PID
start() { # name telemetry extra-env...
  local name=$1 tel=$2; shift 2
  local p=$(free_port) a=$(free_port)
  env PHASEMETER_LISTEN_PORT=$p PHASEMETER_ADMIN_PORT=$a PHASEMETER_POOLS_0_UPSTREAMS=http://127.0.0.1:$STUB \
    PHASEMETER_TELEMETRY_ENABLED=$tel "$@" \
    java -Xms256m -Xmx256m -XX:-UseDynamicNumberOfCompilerThreads -jar $JAR --config $ROOT/bench/proxy.yaml > $W/$name.log 2>&1 &
  PID[$name]=$!; PIDS+=($!); PORT[$name]=$p; ADMIN[$name]=$a
}
declare -A ADMIN
start on true
start exp_all true OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$SINK
start exp_1pc true OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$SINK PHASEMETER_TELEMETRY_SAMPLING_RATIO=0.01
start off false
for t in on exp_all exp_1pc off; do
  for i in $(seq 120); do curl -sf -o /dev/null http://127.0.0.1:${PORT[$t]}/v1/models && break; sleep 0.5; done
done
T="on exp_all exp_1pc off"
for t in $T; do echo "warm $t"; wrk -t1 -c16 -d30s -s $ROOT/bench/chat.lua http://127.0.0.1:${PORT[$t]}/v1/chat/completions > /dev/null; done
for r in 1 2 3; do
  for t in $T; do
    c0=$(awk '{print $14+$15}' /proc/${PID[$t]}/stat)
    rps=$(wrk -t1 -c16 -d8s -s $ROOT/bench/chat.lua http://127.0.0.1:${PORT[$t]}/v1/chat/completions | awk '/Requests\/sec/{print $2}')
    c1=$(awk '{print $14+$15}' /proc/${PID[$t]}/stat)
    us=$(python3 -c "print(round(($c1-$c0)*1e6/($(getconf CLK_TCK)*$rps*8),1))")
    echo "round $r $t rps=$rps cpu_us_per_request=$us load=$(cut -d' ' -f1 /proc/loadavg)"
  done
done
for t in exp_all exp_1pc; do
  echo "$t: $(curl -s http://127.0.0.1:${ADMIN[$t]}/metrics | grep -E '^llm_telemetry_(dropped_total|exports_total|exported_spans_total)|^llm_traces_exported_ratio' | tr '\n' ' ')"
done
