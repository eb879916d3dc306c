# shellcheck shell=bash
#
# services.sh starts throwaway Redis, MariaDB and PostgreSQL servers for
# chime's tests, each in a temp dir on its own free loopback port, and exports
# the variables that internal/base/testenv reads:
#
#   CHIME_TEST_REDIS_URL=redis://127.0.0.1:PORT/0
#   CHIME_TEST_MYSQL_DSN=mysql://root@127.0.0.1:PORT/
#   CHIME_TEST_POSTGRES_DSN=postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable
#   CHIME_TEST_REQUIRE_SERVERS=1
#   CHIME_TEST_SERVICES_DIR=/tmp/chime-services.XXXXXX   (their pid files and logs)
#
# It is sourced, not executed. scripts/test.sh uses it; a developer uses it in
# an interactive shell:
#
#   source scripts/services.sh && services_start
#   go test -race ./internal/store/...        # as often as you like
#   services_stop
#
# Missing server packages (redis-server, mariadb-server, postgresql) are
# installed with apt-get when running as root (Debian 12). As root,
# PostgreSQL runs as the "postgres" user, since it refuses to run as root.
# The data is disposable: fsync is off everywhere.

_chime_svc_dir=""
_chime_pg_bin=""

_svc_log() { printf 'services: %s\n' "$*" >&2; }

# _svc_port_free reports whether nothing listens on 127.0.0.1:$1.
_svc_port_free() {
	! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# _svc_free_port prints a port that is free now, from a random start in
# 20000-32000: below Linux's ephemeral range (32768-60999), so that no
# outgoing connection takes it before the server binds it. A race with
# another process is still possible; services_start then retries.
_svc_free_port() {
	local p i
	p=$((20000 + (RANDOM * 32768 + RANDOM) % 12000))
	for ((i = 0; i < 200; i++)); do
		if _svc_port_free "$p"; then
			echo "$p"
			return 0
		fi
		p=$((p + 1))
		((p > 32000)) && p=20000
	done
	_svc_log "no free port found"
	return 1
}

# _svc_wait NAME SECONDS CMD... runs CMD until it succeeds or the deadline passes.
_svc_wait() {
	local name=$1 secs=$2
	shift 2
	local deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS >= deadline)); then
			_svc_log "$name did not answer within ${secs}s; log:"
			tail -n 30 "$_chime_svc_dir/$name.log" >&2 2>/dev/null
			return 1
		fi
		sleep 0.1
	done
}

_svc_pg_bin() {
	local d
	for d in /usr/lib/postgresql/*/bin; do
		[[ -x $d/postgres ]] && _chime_pg_bin=$d
	done
	[[ -n $_chime_pg_bin ]]
}

# _svc_install installs the Debian packages whose binaries are missing.
_svc_install() {
	local pkgs=()
	command -v redis-server >/dev/null || pkgs+=(redis-server)
	{ command -v mariadbd >/dev/null || [[ -x /usr/sbin/mariadbd ]]; } || pkgs+=(mariadb-server mariadb-client)
	_svc_pg_bin || pkgs+=(postgresql)
	((${#pkgs[@]} == 0)) && return 0
	if [[ $(id -u) != 0 ]]; then
		_svc_log "missing packages ${pkgs[*]}; install them (apt-get install ${pkgs[*]}) or run as root"
		return 1
	fi
	_svc_log "installing ${pkgs[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null || return 1
	# policy-rc.d keeps the packages from starting their system services.
	local prc=/usr/sbin/policy-rc.d made_prc=0
	if [[ ! -e $prc ]]; then
		printf '#!/bin/sh\nexit 101\n' >"$prc" && chmod +x "$prc" && made_prc=1
	fi
	apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
	local rc=$?
	((made_prc)) && rm -f "$prc"
	((rc == 0)) || return 1
	_svc_pg_bin
}

_svc_start_redis() {
	local port
	port=$(_svc_free_port) || return 1
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$_chime_svc_dir" --daemonize yes \
		--pidfile "$_chime_svc_dir/redis.pid" --logfile "$_chime_svc_dir/redis.log" || return 1
	_svc_wait redis 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port; printf 'PING\r\n' >&3; read -t 1 -r l <&3; [[ \$l == +PONG* ]]" || return 1
	export CHIME_TEST_REDIS_URL="redis://127.0.0.1:$port/0"
}

_svc_start_mariadb() {
	local port dir=$_chime_svc_dir/mariadb sock=$_chime_svc_dir/mariadb.sock
	local mysqld=mariadbd client=mariadb
	command -v mariadbd >/dev/null || mysqld=/usr/sbin/mariadbd
	command -v mariadb >/dev/null || client=mysql
	port=$(_svc_free_port) || return 1
	mkdir -p "$dir"
	local user=()
	[[ $(id -u) == 0 ]] && user=(--user=root)
	mariadb-install-db "${user[@]}" --datadir="$dir" --auth-root-authentication-method=normal \
		--skip-test-db --skip-name-resolve >"$_chime_svc_dir/mariadb.log" 2>&1 || {
		_svc_log "mariadb-install-db failed:"
		tail -n 30 "$_chime_svc_dir/mariadb.log" >&2
		return 1
	}
	"$mysqld" --no-defaults "${user[@]}" --datadir="$dir" --socket="$sock" --port="$port" \
		--bind-address=127.0.0.1 --skip-name-resolve --pid-file="$_chime_svc_dir/mariadb.pid" \
		--innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 --sync-binlog=0 \
		--innodb-buffer-pool-size=128M --max-connections=500 --skip-log-bin \
		>>"$_chime_svc_dir/mariadb.log" 2>&1 &
	echo $! >"$_chime_svc_dir/mariadb.bgpid"
	_svc_wait mariadb 60 "$client" --no-defaults -uroot --socket="$sock" -e 'SELECT 1' || return 1
	# root over TCP from 127.0.0.1, passwordless.
	"$client" --no-defaults -uroot --socket="$sock" -e \
		"CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
		 GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
		 FLUSH PRIVILEGES;" || return 1
	_svc_wait mariadb 10 "$client" --no-defaults -uroot -h127.0.0.1 -P"$port" --protocol=tcp -e 'SELECT 1' || return 1
	export CHIME_TEST_MYSQL_DSN="mysql://root@127.0.0.1:$port/"
}

# _svc_exec_postgres DIR PORT starts the PostgreSQL server of services dir
# DIR in the background (as the postgres user when root).
_svc_exec_postgres() {
	local d=$1 port=$2 run=()
	[[ $(id -u) == 0 ]] && run=(runuser -u postgres --)
	"${run[@]}" "$_chime_pg_bin/postgres" -D "$d/pg/data" -p "$port" -h 127.0.0.1 -k "$d/pg" \
		-c fsync=off -c synchronous_commit=off -c full_page_writes=off \
		-c max_connections=300 -c shared_buffers=128MB \
		>>"$d/postgres.log" 2>&1 </dev/null &
	echo $! >"$d/postgres.bgpid"
}

_svc_start_postgres() {
	local port dir=$_chime_svc_dir/pg
	port=$(_svc_free_port) || return 1
	mkdir -p "$dir"
	local run=()
	if [[ $(id -u) == 0 ]]; then
		chown postgres: "$dir" || return 1
		run=(runuser -u postgres --)
	fi
	"${run[@]}" "$_chime_pg_bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-sync \
		>"$_chime_svc_dir/postgres.log" 2>&1 || {
		_svc_log "initdb failed:"
		tail -n 30 "$_chime_svc_dir/postgres.log" >&2
		return 1
	}
	_svc_exec_postgres "$_chime_svc_dir" "$port"
	_svc_wait postgres 60 "$_chime_pg_bin/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres || return 1
	export CHIME_TEST_POSTGRES_DSN="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
}

# _svc_cleanup NAME stops what a failed start of NAME left and removes its
# files.
_svc_cleanup() {
	case $1 in
	redis) _svc_kill TERM "$_chime_svc_dir/redis.pid"; rm -f "$_chime_svc_dir"/redis.* ;;
	mariadb) _svc_kill TERM "$_chime_svc_dir/mariadb.pid" "$_chime_svc_dir/mariadb.bgpid"; rm -rf "$_chime_svc_dir"/mariadb* ;;
	postgres) _svc_kill TERM "$_chime_svc_dir/postgres.bgpid"; rm -rf "$_chime_svc_dir/pg" "$_chime_svc_dir"/postgres.* ;;
	esac
}

# services_start installs what is missing, starts Redis, MariaDB and
# PostgreSQL in parallel and exports the CHIME_TEST_* variables.
services_start() {
	if [[ -n $_chime_svc_dir ]]; then
		_svc_log "already started in $_chime_svc_dir"
		return 0
	fi
	_svc_install || return 1
	_svc_pg_bin || { _svc_log "postgres binaries not found"; return 1; }
	_chime_svc_dir=$(mktemp -d "${TMPDIR:-/tmp}/chime-services.XXXXXX") || return 1
	chmod 755 "$_chime_svc_dir"
	# Start the three at once; each writes its exports to a file.
	local s pids=() failed=0
	for s in redis mariadb postgres; do
		(
			# A start can lose its port to another process: try again on
			# another port, from a clean slate.
			local try
			for ((try = 1; ; try++)); do
				"_svc_start_$s" && break
				((try < 3)) || exit 1
				_svc_log "$s: start failed (attempt $try); retrying"
				_svc_cleanup "$s"
			done
			local v
			for v in ${!CHIME_TEST_*}; do
				printf "export %s=%q\n" "$v" "${!v}"
			done >"$_chime_svc_dir/$s.env"
		) &
		pids+=($!)
	done
	for s in "${pids[@]}"; do
		wait "$s" || failed=1
	done
	if ((failed)); then
		_svc_log "start-up failed; stopping"
		services_stop
		return 1
	fi
	for s in redis mariadb postgres; do
		# shellcheck disable=SC1090
		source "$_chime_svc_dir/$s.env"
	done
	export CHIME_TEST_REQUIRE_SERVERS=1
	export CHIME_TEST_SERVICES_DIR=$_chime_svc_dir
	_svc_log "redis $CHIME_TEST_REDIS_URL"
	_svc_log "mariadb $CHIME_TEST_MYSQL_DSN"
	_svc_log "postgres $CHIME_TEST_POSTGRES_DSN"
}

# _svc_alive PID reports whether PID runs: exists and is no zombie (whose
# parent has not reaped it yet, e.g. a runuser stopped by its terminal).
_svc_alive() {
	local st
	st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	[[ $st != Z* ]]
}

# _svc_kill SIGNAL PIDFILE... sends SIGNAL to the process named on the first
# line of the first PIDFILE that exists, and waits up to 10s for it to exit.
_svc_kill() {
	local sig=$1 f pid="" i
	shift
	for f in "$@"; do
		if [[ -s $f ]]; then
			read -r pid <"$f"
			break
		fi
	done
	[[ -n $pid ]] || return 0
	kill -"$sig" "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 100; i++)); do
		_svc_alive "$pid" || return 0
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null
	return 0
}

# services_stop stops the servers that services_start started and removes
# their temp dir and the CHIME_TEST_* variables.
services_stop() {
	[[ -n $_chime_svc_dir ]] || return 0
	local d=$_chime_svc_dir
	local pids=() p
	# A server frozen by a stall (SIGSTOP) would not hear SIGTERM.
	services_resume_mariadb "$d" 2>/dev/null
	services_resume_postgres "$d" 2>/dev/null
	_svc_kill TERM "$d/redis.pid" &
	pids+=($!)
	_svc_kill TERM "$d/mariadb.pid" "$d/mariadb.bgpid" &
	pids+=($!)
	_svc_kill INT "$d/pg/data/postmaster.pid" "$d/postgres.bgpid" &
	pids+=($!)
	for p in "${pids[@]}"; do
		wait "$p"
	done
	rm -rf "$d"
	_chime_svc_dir=""
	unset CHIME_TEST_REDIS_URL CHIME_TEST_MYSQL_DSN CHIME_TEST_POSTGRES_DSN CHIME_TEST_REQUIRE_SERVERS CHIME_TEST_SERVICES_DIR
}

# _svc_dir_arg prints the services dir: $1 if given, else the one that
# services_start made (or CHIME_TEST_SERVICES_DIR). A command run by `chime chaos` is a new shell, so
# it passes the dir (and inherits the CHIME_TEST_* variables).
_svc_dir_arg() {
	local d=${1:-${_chime_svc_dir:-${CHIME_TEST_SERVICES_DIR:-}}}
	if [[ -z $d || ! -d $d ]]; then
		_svc_log "no services dir (run services_start, or pass its dir)"
		return 1
	fi
	echo "$d"
}

# services_restart_redis [DIR] stops Redis (SIGTERM; it keeps no data) and
# starts it again on the same port and dir.
services_restart_redis() {
	local d port
	d=$(_svc_dir_arg "$1") || return 1
	port=${CHIME_TEST_REDIS_URL#redis://127.0.0.1:}
	port=${port%%/*}
	[[ $port =~ ^[0-9]+$ ]] || { _svc_log "CHIME_TEST_REDIS_URL not set"; return 1; }
	_svc_kill TERM "$d/redis.pid"
	rm -f "$d/redis.pid"
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$d" --daemonize yes \
		--pidfile "$d/redis.pid" --logfile "$d/redis.log" || return 1
	local _chime_svc_dir=$d
	_svc_wait redis 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port; printf 'PING\r\n' >&3; read -t 1 -r l <&3; [[ \$l == +PONG* ]]"
}

# services_restart_mariadb [DIR] stops MariaDB (SIGTERM, clean shutdown)
# and starts it again on the same port and data dir.
services_restart_mariadb() {
	local d port
	d=$(_svc_dir_arg "$1") || return 1
	port=${CHIME_TEST_MYSQL_DSN#mysql://root@127.0.0.1:}
	port=${port%%/*}
	[[ $port =~ ^[0-9]+$ ]] || { _svc_log "CHIME_TEST_MYSQL_DSN not set"; return 1; }
	local mysqld=mariadbd client=mariadb
	command -v mariadbd >/dev/null || mysqld=/usr/sbin/mariadbd
	command -v mariadb >/dev/null || client=mysql
	_svc_kill TERM "$d/mariadb.pid" "$d/mariadb.bgpid"
	local i
	for ((i = 0; i < 100; i++)); do
		_svc_port_free "$port" && break
		sleep 0.1
	done
	local user=()
	[[ $(id -u) == 0 ]] && user=(--user=root)
	rm -f "$d/mariadb.pid"
	"$mysqld" --no-defaults "${user[@]}" --datadir="$d/mariadb" --socket="$d/mariadb.sock" --port="$port" \
		--bind-address=127.0.0.1 --skip-name-resolve --pid-file="$d/mariadb.pid" \
		--innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 --sync-binlog=0 \
		--innodb-buffer-pool-size=128M --max-connections=500 --skip-log-bin \
		>>"$d/mariadb.log" 2>&1 </dev/null &
	echo $! >"$d/mariadb.bgpid"
	disown 2>/dev/null
	local _chime_svc_dir=$d
	_svc_wait mariadb 30 "$client" --no-defaults -uroot -h127.0.0.1 -P"$port" --protocol=tcp -e 'SELECT 1'
}

# services_restart_postgres [DIR] stops PostgreSQL (SIGINT, fast shutdown:
# sessions are ended) and starts it again on the same port and data dir.
services_restart_postgres() {
	local d port
	d=$(_svc_dir_arg "$1") || return 1
	port=${CHIME_TEST_POSTGRES_DSN#postgres://postgres@127.0.0.1:}
	port=${port%%/*}
	[[ $port =~ ^[0-9]+$ ]] || { _svc_log "CHIME_TEST_POSTGRES_DSN not set"; return 1; }
	_svc_pg_bin || { _svc_log "postgres binaries not found"; return 1; }
	_svc_kill INT "$d/pg/data/postmaster.pid" "$d/postgres.bgpid"
	local i
	for ((i = 0; i < 100; i++)); do
		_svc_port_free "$port" && break
		sleep 0.1
	done
	_svc_exec_postgres "$d" "$port"
	disown 2>/dev/null
	local _chime_svc_dir=$d
	_svc_wait postgres 30 "$_chime_pg_bin/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres
}

# _svc_pid FILE prints the pid on the first line of FILE, if that process
# runs.
_svc_pid() {
	local pid=""
	[[ -s $1 ]] && read -r pid <"$1"
	[[ $pid =~ ^[0-9]+$ ]] && _svc_alive "$pid" && echo "$pid"
}

# services_stall_mariadb [DIR] freezes MariaDB (SIGSTOP): connections stay
# open, nothing answers. services_resume_mariadb [DIR] lets it go (SIGCONT).
services_stall_mariadb() {
	local d pid
	d=$(_svc_dir_arg "$1") || return 1
	pid=$(_svc_pid "$d/mariadb.pid") || { _svc_log "mariadb not running in $d"; return 1; }
	kill -STOP "$pid"
}

services_resume_mariadb() {
	local d pid
	d=$(_svc_dir_arg "$1") || return 1
	pid=$(_svc_pid "$d/mariadb.pid") || return 0
	kill -CONT "$pid"
}

# services_stall_postgres [DIR] freezes PostgreSQL: SIGSTOP to the
# postmaster first (it then forks no new backend), then to all its
# children (backends, checkpointer, WAL writer…). services_resume_postgres
# [DIR] sends SIGCONT to the children, then to the postmaster.
services_stall_postgres() {
	local d pm
	d=$(_svc_dir_arg "$1") || return 1
	pm=$(_svc_pid "$d/pg/data/postmaster.pid") || { _svc_log "postgres not running in $d"; return 1; }
	kill -STOP "$pm" || return 1
	# The children are listed once the postmaster cannot fork any more.
	# shellcheck disable=SC2046
	kill -STOP $(ps -o pid= --ppid "$pm") 2>/dev/null
	return 0
}

services_resume_postgres() {
	local d pm
	d=$(_svc_dir_arg "$1") || return 1
	pm=$(_svc_pid "$d/pg/data/postmaster.pid") || return 0
	# shellcheck disable=SC2046
	kill -CONT $(ps -o pid= --ppid "$pm") 2>/dev/null
	kill -CONT "$pm"
}
