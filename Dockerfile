# Rotor: multi-stage build. The first stage compiles the native SQLite addon from source (no prebuilt
# downloads) and the TypeScript sources to dist/ (npm ci runs the prepare script), then drops the
# development dependencies; the runtime stage carries the compiled JavaScript and production dependencies
# only, and runs as a non-root user.
FROM node:20-bookworm-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm ci --build-from-source && npm prune --omit=dev
COPY bin ./bin
COPY config ./config
COPY web ./web
RUN rm -rf src tsconfig.json tsconfig.build.json

FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app /app
RUN groupadd --system rotor && useradd --system --gid rotor --home /app rotor \
  && mkdir -p /app/data && chown rotor:rotor /app/data
USER rotor
# Inside a container the listeners must bind beyond loopback to be reachable; publish the ports only to
# the interfaces you mean (e.g. -p 127.0.0.1:8080:8080) and set ROTOR_ADMIN_TOKEN.
ENV ROTOR_CONFIG=/app/config/default.yaml ROTOR_STORE=/app/data/rotor.db
VOLUME ["/app/config", "/app/data"]
# 8080 HTTP proxy, 1080 SOCKS5 proxy, 9090 admin API and metrics, 9091 platform callbacks
EXPOSE 8080 1080 9090 9091
HEALTHCHECK --interval=30s --timeout=3s --start-period=20s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:9090/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# Memory (docs/benchmarks.md "Idle RSS"), as `npm start` runs it: V8's young generation at 16 MiB per
# semi-space (node's default, named; 4 saved memory for half a minute after traffic and cost 5-12 % more CPU
# per new tunnel); glibc's malloc thresholds fixed, so the 16 MiB blocks of the passwords' scrypt do not raise
# them and leave freed memory resident; and one malloc arena, so V8's helper threads do not each keep an arena
# of freed compiler and GC memory. ~97 MiB RSS after 30 s idle instead of ~147.
ENV MALLOC_ARENA_MAX=1 MALLOC_MMAP_THRESHOLD_=4194304 MALLOC_TRIM_THRESHOLD_=16777216
# Stopping: SIGTERM stops accepting, drains open connections for proxy.drainMs (default 5 s), records those it
# cuts as `shutdown` and writes the last counters. Give the container a grace of drainMs + 5 s or more: docker
# stop's default 10 s fits the default drain; with a longer drain set `docker stop -t`, `docker run
# --stop-timeout`, Compose `stop_grace_period` or Kubernetes `terminationGracePeriodSeconds` to match. A SIGKILL
# during the drain costs about a second of each open connection's bytes (README, "What a stop or a crash costs
# the bill").
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "--max-semi-space-size=16", "bin/rotor.js"]
CMD ["start"]
