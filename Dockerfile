# syntax=docker/dockerfile:1
# One image, both binaries: `stampede` (the CLI and the runner pods' `stampede runner`, the
# entrypoint) and `stampede-operator` (the chart's Deployment runs `command: [stampede-operator]`).
# Static musl builds on distroless/static, as user 65532 (nonroot).
#   docker buildx build -t ghcr.io/stampede-dev/stampede:0.1.0 .
# Multi-arch (linux/amd64, linux/arm64) builds each platform natively or under emulation.

FROM rust:1.89-bookworm AS build
ARG TARGETARCH
RUN apt-get update && apt-get install -y --no-install-recommends musl-tools && rm -rf /var/lib/apt/lists/*
RUN case "${TARGETARCH:-amd64}" in \
      amd64) echo x86_64-unknown-linux-musl ;; \
      arm64) echo aarch64-unknown-linux-musl ;; \
      *) echo "unsupported TARGETARCH ${TARGETARCH}" >&2; exit 1 ;; \
    esac > /rust-target \
 && rustup target add "$(cat /rust-target)"
WORKDIR /src
COPY . .
# The caches keep the registry and the build folder between builds; the binaries are copied
# out of the cached folder.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    target="$(cat /rust-target)" \
 && cargo build --release --locked --target "$target" -p stampede -p stampede-operator \
 && mkdir -p /out \
 && cp "target/$target/release/stampede" "target/$target/release/stampede-operator" /out/

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/stampede /out/stampede-operator /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/stampede"]
