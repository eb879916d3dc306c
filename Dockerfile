# The chime container image: the static chime binary (with the time-zone
# database embedded, time/tzdata), CA certificates for HTTPS callbacks, a
# non-root user (65532) and the node's data in the /data volume. Nothing
# else: no shell, no libc.
#
#   docker build -t chime .        # or podman build --format docker -t chime .
#   docker run -p 8080:8080 -v chime-data:/data -e CHIME_ADMIN_TOKEN=$(openssl rand -base64 32) chime
#
# Inside, the node listens on 0.0.0.0:8080 (CHIME_LISTEN) with its data dir,
# and by default its SQLite file, in /data (CHIME_DATA_DIR). A node that
# listens beyond loopback needs a token (CHIME_ADMIN_TOKEN) or exits 2; see
# docs/security.md. Every `chime serve` flag can be given as a CHIME_
# variable or after the image name (docker run chime serve --db ...). The
# health check asks /readyz on 127.0.0.1:8080: set CHIME_URL too when
# CHIME_LISTEN moves the port.
#
# --build-arg BINARY=prebuilt takes the binary and the CA certificates from
# the build context (dist/chime, dist/ca-certificates.crt, and the empty
# directories dist/writable/data and dist/writable/tmp, mode 700) instead
# of compiling them in the Go image: no image is pulled, so it builds
# offline. scripts/deploy-check.sh builds and inspects the image that way.

ARG GO_VERSION=1.26.8
ARG BINARY=build

# The binary, compiled from source.
FROM docker.io/library/golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/chime ./cmd/chime \
	&& cp /etc/ssl/certs/ca-certificates.crt /out/ \
	&& mkdir -p -m 700 /out/writable/data /out/writable/tmp

# The binary, built beforehand: CGO_ENABLED=0 go build -trimpath -o dist/chime ./cmd/chime
FROM scratch AS prebuilt
COPY dist/ /out/

# The one the final stage takes: build or prebuilt.
FROM ${BINARY} AS binary

FROM scratch
COPY --from=binary /out/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=binary /out/chime /chime
# /data and /tmp, the image user's (mode 700): copied as the children of a
# directory, which keeps their mode, where a directory copied to a name of
# its own would get 755.
COPY --from=binary --chown=65532:65532 /out/writable/ /
USER 65532:65532
WORKDIR /data
ENV CHIME_LISTEN=0.0.0.0:8080 \
	CHIME_DATA_DIR=/data \
	TMPDIR=/tmp
VOLUME /data
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["/chime", "healthcheck"]
ENTRYPOINT ["/chime"]
CMD ["serve"]
