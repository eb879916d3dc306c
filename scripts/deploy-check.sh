#!/usr/bin/env bash
# deploy-check.sh checks the deployment files, offline (scripts/test.sh
# runs it):
#
#   - Dockerfile: the image is built with podman from a binary built here
#     (--build-arg BINARY=prebuilt: FROM scratch only, nothing is pulled),
#     then `podman image inspect` checks its user, entrypoint, command,
#     port, volume, environment and health check, and its files are listed.
#     As root, the image's file system is then run the way a container
#     runtime would (chroot as the image's user, with its environment, in a
#     network namespace of its own): `chime serve` comes up, the image's
#     health check command passes, a time zone loads without any zoneinfo.
#   - docker-compose.yml, alone and with compose.postgres.yml:
#     `docker-compose config -q`.
#
# podman and docker-compose are installed (Debian packages podman,
# docker-compose) when missing and this runs as root with apt-get, as in
# CI; otherwise their checks are skipped, saying so.
#
# How podman is run here: as root, with a storage of its own in a temporary
# directory (--root, --runroot; nothing is left in /var/lib/containers) and
# --storage-driver vfs (plain directories, no overlay mounts to undo), and
# --format docker, since the OCI image format has no HEALTHCHECK (podman
# drops it with a warning). The prebuilt stages have no RUN step, so the
# build starts no container. `podman run` does not work in this sandbox
# (crun: setrlimit RLIMIT_NOFILE: Operation not permitted), hence chroot.
#
# Time: the CGO_ENABLED=0 build of the binary is the bulk of it with a cold
# build cache (about 2 minutes of CPU); 20 s with a warm one.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "deploy-check: $*" >&2; }
fail() {
	log "FAIL: $*"
	exit 1
}

# ensure CMD PKG: CMD is there, installed from Debian package PKG if need be.
ensure() {
	command -v "$1" >/dev/null 2>&1 && return 0
	if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
		log "installing $2"
		export DEBIAN_FRONTEND=noninteractive
		apt-get install -y -q "$2" >/dev/null 2>&1 ||
			{ apt-get update -q >/dev/null 2>&1 && apt-get install -y -q "$2" >/dev/null 2>&1; } ||
			log "apt-get install $2 failed"
	fi
	command -v "$1" >/dev/null 2>&1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/chime-deploy-check.XXXXXX")
trap 'rm -rf "$work"' EXIT

check_image() {
	local ctx=$work/context img=localhost/chime:deploy-check
	local podman=(podman --root "$work/storage" --runroot "$work/run" --storage-driver vfs)
	mkdir -p "$ctx/dist/writable"
	mkdir -m 700 "$ctx/dist/writable/data" "$ctx/dist/writable/tmp"
	# The build flags of the Dockerfile's build stage.
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$ctx/dist/chime" ./cmd/chime
	cp /etc/ssl/certs/ca-certificates.crt "$ctx/dist/"
	cp Dockerfile .dockerignore "$ctx/"
	"${podman[@]}" build -q --format docker --build-arg BINARY=prebuilt -t "$img" "$ctx" >/dev/null ||
		fail "podman build of Dockerfile (BINARY=prebuilt)"

	local want got
	while IFS='|' read -r format want; do
		got=$("${podman[@]}" image inspect --format "$format" "$img")
		[[ $got == "$want" ]] || fail "image $format is $got, want $want"
	done <<-'TABLE'
		{{.Config.User}}|65532:65532
		{{json .Config.Entrypoint}}|["/chime"]
		{{json .Config.Cmd}}|["serve"]
		{{json .Config.ExposedPorts}}|{"8080/tcp":{}}
		{{json .Config.Volumes}}|{"/data":{}}
		{{.Config.WorkingDir}}|/data
		{{json .HealthCheck.Test}}|["CMD","/chime","healthcheck"]
	TABLE
	local env
	env=$("${podman[@]}" image inspect --format '{{range .Config.Env}}{{println .}}{{end}}' "$img")
	for want in CHIME_LISTEN=0.0.0.0:8080 CHIME_DATA_DIR=/data; do
		grep -qx "$want" <<<"$env" || fail "image environment lacks $want: $env"
	done

	local root
	root=$("${podman[@]}" image mount "$img")
	got=$(cd "$root" && find . -printf '%p %U:%G %m\n' | sort)
	want=$(
		cat <<-'FILES'
			. 0:0 555
			./chime 0:0 755
			./data 65532:65532 700
			./etc 0:0 755
			./etc/ssl 0:0 755
			./etc/ssl/certs 0:0 755
			./etc/ssl/certs/ca-certificates.crt 0:0 644
			./tmp 65532:65532 700
		FILES
	)
	[[ $got == "$want" ]] || fail "image files:
$got
want:
$want"
	log "image: user, entrypoint, port, volume, health check and files as expected"

	# Can this machine do it at all? (A container without CAP_SYS_ADMIN or
	# CAP_SYS_CHROOT cannot.) Probed on the host's own root, so that a
	# broken image fails below instead of being skipped.
	if [[ $(id -u) != 0 ]] || ! unshare --net true 2>/dev/null || ! chroot / true 2>/dev/null; then
		log "image not run: needs root, network namespaces (unshare) and chroot"
		return 0
	fi
	# The image's process: its user, its environment (a token, as a
	# node listening on 0.0.0.0 needs one), entrypoint and command, in a
	# network namespace of its own, where 8080 is free.
	local user chroot envs
	mapfile -t envs <<<"$env"
	user=$("${podman[@]}" image inspect --format '{{.Config.User}}' "$img")
	chroot=$(command -v chroot)
	# shellcheck disable=SC2016 # the script expands its own arguments
	if ! unshare --net bash -c '
		set -u
		root=$1 user=$2 chroot=$3
		shift 3
		ip link set lo up 2>/dev/null || { echo "no loopback in the namespace"; exit 1; }
		env -i "$@" CHIME_ADMIN_TOKEN=deploy-check-admin-token-0123456789 \
			"$chroot" --userspec="$user" "$root" /chime serve >"$root/tmp/serve.log" 2>&1 &
		pid=$!
		ok=
		for _ in $(seq 1 300); do
			if env -i "$chroot" --userspec="$user" "$root" /chime healthcheck --timeout 1s >/dev/null 2>&1; then
				ok=1
				break
			fi
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		[[ -n $ok ]] || { echo "chime serve in the image never became healthy:"; cat "$root/tmp/serve.log"; kill "$pid" 2>/dev/null; exit 1; }
		out=$(env -i "$chroot" --userspec="$user" "$root" /chime cron next -n 1 --tz Asia/Tokyo "0 0 9 * * *" --from 2026-05-31T12:00:00Z) || exit 1
		[[ $out == 2026-06-01T09:00:00+09:00* ]] || { echo "a zone in the image: $out"; exit 1; }
		kill -TERM "$pid"
		wait "$pid" || { echo "chime serve exited $?:"; cat "$root/tmp/serve.log"; exit 1; }
		[[ -s $root/data/chime.db ]] || { echo "no /data/chime.db"; exit 1; }
	' deploy-check "$root" "$user" "$chroot" "${envs[@]}"; then
		fail "running the image's file system"
	fi
	log "image: chime serve runs as $user, healthy by chime healthcheck; zones load"
}

check_compose() {
	# The compose files need a token; any will do for config.
	export CHIME_ADMIN_TOKEN=deploy-check-admin-token-0123456789
	docker-compose -f docker-compose.yml config -q || fail "docker-compose config of docker-compose.yml"
	docker-compose -f docker-compose.yml -f compose.postgres.yml config -q ||
		fail "docker-compose config of docker-compose.yml with compose.postgres.yml"
	local merged
	merged=$(docker-compose -f docker-compose.yml -f compose.postgres.yml config)
	grep -q 'image: docker.io/library/postgres' <<<"$merged" || fail "compose.postgres.yml: no PostgreSQL image"
	[[ $(grep -c 'CHIME_DB: postgres://' <<<"$merged") == 3 ]] || fail "compose.postgres.yml: not every node on PostgreSQL"
	log "compose: docker-compose.yml and compose.postgres.yml valid"
}

if ensure podman podman; then
	check_image
else
	log "podman missing: image not checked"
fi
if ensure docker-compose docker-compose; then
	check_compose
else
	log "docker-compose missing: compose files not checked"
fi
