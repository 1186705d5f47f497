# syntax=docker/dockerfile:1
# The Sluice container image: one static binary on distroless, run as the
# non-root user 65532, with `sluice healthcheck` (GET /readyz) as its health
# check, since distroless has no shell and no curl.
#
#   docker build -t sluice:dev --build-arg VERSION=v1.2.3 .
#   docker run -p 8080:8080 -p 8081:8081 sluice:dev
#
# The go build line below is the release build (`make release`,
# .goreleaser.yaml); deploy/dockerfile_test.go runs that exact line without a
# Docker engine, so the image keeps building.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/sluice ./cmd/sluice
RUN mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sluice /usr/local/bin/sluice
COPY --from=build --chown=65532:65532 /out/data /var/lib/sluice
USER 65532:65532
# Listen on every address inside the container; keep data (SQLite, the
# embedded NATS store, generated secrets) in the volume.
ENV SLUICE_HTTP_ADDR=0.0.0.0:8080 \
    SLUICE_GRPC_ADDR=0.0.0.0:8081 \
    SLUICE_DATA_DIR=/var/lib/sluice \
    SLUICE_LOG_FORMAT=json
VOLUME /var/lib/sluice
EXPOSE 8080 8081
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["/usr/local/bin/sluice", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/sluice"]
CMD ["serve"]
