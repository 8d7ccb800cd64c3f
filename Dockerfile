# Build: the dev dependencies (TypeScript) compile src/, plugins/ and routes/ to dist/.
FROM node:22-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY plugins ./plugins
COPY routes ./routes
# The service only: the callers' client package (client/) is not in the image.
RUN npm run build:service

# Run: production dependencies, the compiled JavaScript and the SQL
# migrations, which the service reads from migrations/ beside dist/.
FROM node:22-bookworm-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY migrations ./migrations
# The image's unprivileged user. Only the embedded database (no DATABASE_URL)
# writes, to .data/: mount a volume there to keep it.
RUN mkdir .data && chown node:node .data
USER node
EXPOSE 3000
# Node itself is PID 1 (exec form, no npm or shell in between), so SIGTERM
# reaches the service, which drains in-flight requests and exits 0.
STOPSIGNAL SIGTERM
# No curl in slim images: Node asks /health/ready.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "dist/src/healthcheck.js"]
CMD ["node", "dist/src/server.js"]
