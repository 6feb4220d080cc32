# syntax=docker/dockerfile:1
# Phasemeter proxy image. Build at the repository root:
#   docker build -t phasemeter-proxy:0.1.0 .
#   export PHASEMETER_ADMIN_TOKEN="$(cat /path/to/admin-token)"   # from your secret store
#   docker run --rm -p 8080:8080 -p 9464:9464 -v "$PWD/config:/config:ro" -e PHASEMETER_ADMIN_TOKEN \
#     -e PHASEMETER_POOLS_0_UPSTREAMS=http://host.docker.internal:8000 phasemeter-proxy:0.1.0
# The admin port listens beyond loopback here, so PHASEMETER_ADMIN_TOKEN must be given at
# `docker run -e` (from a secret, never baked into the image): without it, or with a placeholder
# or one shorter than 16 characters, the proxy refuses to start (exit 2, one line naming
# admin.token). Make one with `openssl rand -hex 32`.
# The image also carries the load client (/app/phasemeter-load.jar) for distributed load Jobs.
# Base images are pinned by tag; pin them by digest too where your registry policy asks for it.

# ---- build: the Maven wrapper builds the two fat jars (tests run in CI, not here) ----
FROM eclipse-temurin:17.0.15_6-jdk-jammy AS build
WORKDIR /src
# The poms and the wrapper first, so dependency downloads stay cached while sources change.
COPY .mvn/ .mvn/
COPY mvnw pom.xml ./
COPY core/pom.xml core/
COPY simulator/pom.xml simulator/
COPY proxy/pom.xml proxy/
COPY load-client/pom.xml load-client/
COPY accuracy/pom.xml accuracy/
COPY bench/pom.xml bench/
RUN ./mvnw -B -q -pl proxy,load-client -am dependency:go-offline -Dspotless.check.skip=true
COPY core/src/ core/src/
COPY simulator/src/ simulator/src/
COPY proxy/src/ proxy/src/
COPY load-client/src/ load-client/src/
RUN ./mvnw -B -q -pl proxy,load-client -am package -DskipTests -Dspotless.check.skip=true

# ---- run: a slim JRE, a non-root user, the config on a volume ----
FROM eclipse-temurin:17.0.15_6-jre-jammy
LABEL org.opencontainers.image.title="phasemeter-proxy" \
      org.opencontainers.image.description="OpenAI-compatible measuring reverse proxy for vLLM" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 phasemeter \
 && useradd --system --uid 10001 --gid phasemeter --no-create-home --shell /usr/sbin/nologin phasemeter
WORKDIR /app
COPY --from=build /src/proxy/target/phasemeter-proxy.jar /src/load-client/target/phasemeter-load.jar /app/
# The load client's JVM options: docker run --entrypoint java IMAGE @/app/load-client.jvm -jar
# /app/phasemeter-load.jar run ... (its GC pauses otherwise land inside the measured seconds). It
# pre-touches 1 GB of heap at start-up and may grow to 4 GB in long runs: size the container so.
COPY config/load-client.jvm /app/
# The shipped defaults; mount your own directory over /config (proxy.yaml, budgets.yaml).
COPY config/proxy.yaml config/budgets.yaml /config/
VOLUME ["/config"]
# Sized for a container: the heap follows the cgroup memory limit, an OOM ends the process (the
# orchestrator restarts it) instead of limping, and ZGC keeps pauses out of the streams'
# inter-token latency (config/proxy.jvm says why; the pauses are measured: JVM metrics sit next to
# the phases on /metrics). Half the limit for the heap: ZGC commits and walks all of it, and the
# rest is for metaspace, code, threads and Netty's direct buffers. Without a collector named, the
# JVM picks Serial GC in a container with under 2 CPUs or about 1.8 GB of memory.
ENV JAVA_TOOL_OPTIONS="-XX:MaxRAMPercentage=50.0 -XX:InitialRAMPercentage=50.0 -XX:+UseZGC -XX:+ExitOnOutOfMemoryError" \
    PHASEMETER_ADMIN_HOST=0.0.0.0
USER 10001:10001
# 8080: the OpenAI-compatible listener; 9464: admin (/metrics, /health/*, records, POST /v1/traces).
# The admin port leaves loopback in a container, so the image sets no token and the proxy refuses
# to start until PHASEMETER_ADMIN_TOKEN is given; it then guards all but /health/*.
EXPOSE 8080 9464
# No curl in the JRE image: bash's /dev/tcp asks /health/live for its status line.
HEALTHCHECK --interval=15s --timeout=3s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/9464 && printf 'GET /health/live HTTP/1.0\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]
ENTRYPOINT ["java", "-jar", "/app/phasemeter-proxy.jar"]
CMD ["--config", "/config/proxy.yaml"]
