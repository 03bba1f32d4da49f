# syntax=docker/dockerfile:1
# sluice container image: `docker build -t sluice .`
# libgit2 is vendored into the binary, so the runtime image needs no git; it needs libssl
# (libgit2's https transport links OpenSSL) and CA certificates (https remotes, and forges,
# Prometheus and notifications over rustls read the system store). e2e/it/image.rs checks
# the runtime stage against `ldd` of the binary, the programs the code starts and the install
# manifests' port. The release workflow builds linux/arm64 from this same file under QEMU.

FROM rust:1-bookworm AS build
# What `sluice version` prints: .git is not in the build context, so the release workflow
# passes the commit and its date (build.rs falls back to `unknown` without them).
ARG SLUICE_GIT_COMMIT=unknown
ARG SOURCE_DATE_EPOCH
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin sluice

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates libssl3 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 sluice \
 && useradd --uid 65532 --gid 65532 --home-dir /var/cache/sluice --no-create-home \
      --shell /usr/sbin/nologin sluice \
 && mkdir -p /var/cache/sluice \
 && chown 65532:65532 /var/cache/sluice
COPY --from=build /src/target/release/sluice /usr/local/bin/sluice
# The persistent clone lives in /var/cache/sluice/repo, its lock file beside it (an emptyDir
# in examples/install/deployment.yaml, so a read-only root filesystem works).
ENV SLUICE_WORKDIR=/var/cache/sluice/repo HOME=/var/cache/sluice
USER 65532:65532
# 8723: the forge webhooks (and /metrics unless --metrics-listen moves it: the install binds
# 8725); 8081: /healthz and /readyz for the kubelet, which the install manifest binds with
# --probe-listen 0.0.0.0:8081. The dashboard has no port here: `sluice run` serves it only on
# --dashboard-listen, which the install keeps on loopback.
EXPOSE 8723 8725 8081
ENTRYPOINT ["/usr/local/bin/sluice"]
CMD ["run"]
