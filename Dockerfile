# mdvfs, built from this repository: `docker build -t mdvfs .` (or `docker compose -f deploy/compose.yaml build`).
# The image runs `mdvfs serve` (daemon + HTTP workers) as the unprivileged user `node`, data in the
# volume /var/lib/mdvfs. Other commands: `docker run … mdvfs daemon`, `… mdvfs http` (deploy/compose.yaml).
# The FUSE mount is not built (no libfuse3 here, and a container would need /dev/fuse and CAP_SYS_ADMIN).

FROM node:20-bookworm-slim AS build
# better-sqlite3 and node-pty compile when no prebuilt binary matches.
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ ca-certificates \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
# Scripts later: `prepare` builds dist/ and needs the sources.
RUN npm ci --ignore-scripts
COPY . .
RUN npm rebuild better-sqlite3 && npm run build && npm prune --omit=dev --ignore-scripts

FROM node:20-bookworm-slim
# openssl: deploy/make-pki.sh makes the daemons' TLS certificates (compose's `pki` service).
RUN apt-get update && apt-get install -y --no-install-recommends openssl tini \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/deploy ./deploy
RUN ln -s /app/dist/cli/main.js /usr/local/bin/mdvfs \
    && install -d -o node -g node -m 0700 /var/lib/mdvfs /pki
ENV NODE_ENV=production \
    SERVICE_DATA_DIR=/var/lib/mdvfs \
    SERVICE_MODE=hosted \
    SERVICE_LISTEN=0.0.0.0:3000
USER node
VOLUME ["/var/lib/mdvfs"]
EXPOSE 3000
# tini forwards SIGTERM to serve, which stops the workers, then the daemon (it flushes), then exits 0.
ENTRYPOINT ["/usr/bin/tini", "--", "mdvfs"]
CMD ["serve"]
