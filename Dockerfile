# Production dependencies only. The only stage that sees .npmrc (registry
# settings, possibly a token): the runtime stage copies node_modules from
# here and never holds it.
FROM node:26-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
# npm leaves the scopes of omitted packages (@tapjs/, @types/ …) as empty
# directories: removed, so what is listed is what is installed.
RUN npm ci --omit=dev --no-audit --no-fund \
 && find node_modules -mindepth 1 -maxdepth 1 -type d -empty -delete

# Build: the dev dependencies (TypeScript) compile app.ts, server.ts, src/,
# plugins/ and routes/ to dist/, src/bin/migrate.ts included.
FROM node:26-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json app.ts server.ts ./
COPY src ./src
COPY plugins ./plugins
COPY routes ./routes
# The service only: the callers' client package (client/) is not in the image.
RUN npm run build:service

# Run: production dependencies, the compiled JavaScript and the SQL
# migrations, which the service reads from migrations/ beside dist/.
FROM node:26-bookworm-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    NPM_CONFIG_UPDATE_NOTIFIER=false
WORKDIR /app
COPY package.json package-lock.json ./
# No TypeScript here: `npm start` and `npm run migrate` run the compiled
# JavaScript (in a checkout they run the TypeScript source through tsx).
RUN npm pkg set scripts.start="node dist/server.js" scripts.migrate="node dist/src/bin/migrate.js"
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY migrations ./migrations
# The image's unprivileged user. Only the embedded database (no DATABASE_URL)
# writes, to .data/: mount a volume there to keep it.
RUN mkdir .data && chown node:node .data
USER node
EXPOSE 3000
# Node itself is PID 1 (exec form, no npm or shell in between), so SIGTERM
# reaches the service, which drains in-flight requests for at most 5 s and
# exits 0, inside `docker stop`'s default 10 s.
STOPSIGNAL SIGTERM
# Liveness, not readiness. An engine or orchestrator that acts on this status
# restarts or replaces an unhealthy container; when the database is down,
# every replica is unready at once, and restarting them fixes nothing (each
# already reconnects and migrates by itself) while it cuts off requests that
# are still being answered. So "unhealthy" here means only "the process no
# longer answers HTTP", which a restart does fix. Readiness (/health/ready)
# is for what routes traffic or waits for the service: a load balancer's
# probe, and compose's `depends_on: service_healthy`, which is why
# docker-compose.yml sets its own healthcheck with `ready`.
# No curl in slim images: Node asks.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "dist/src/bin/healthcheck.js", "live"]
CMD ["node", "dist/server.js"]
