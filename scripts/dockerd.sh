#!/usr/bin/env bash
# Gives the docker backend's tests a Docker daemon where none answers and
# this machine can have one (root, with apt-get): Debian's docker.io, and
# busybox-static for the tests' image. The daemon uses its own data
# folder, no bridge and no iptables rules: the tests' containers have no
# network. Anything that fails here only makes those tests skip, saying
# why.
set -u
if [ -n "${DOCKER_HOST:-}" ]; then
	exit 0 # the caller's own daemon
fi
ping() { curl -fsS --max-time 2 --unix-socket /var/run/docker.sock http://docker/_ping >/dev/null 2>&1; }
if ping; then
	exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "no Docker daemon answers and this machine cannot start one (needs root and apt-get): the docker backend's tests will skip"
	exit 0
fi
need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v curl >/dev/null 2>&1 || need+=(curl)
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
if [ ${#need[@]} -gt 0 ]; then
	echo "installing ${need[*]} for the docker backend's tests"
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
		{ apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1; }
fi
if ! command -v dockerd >/dev/null 2>&1; then
	echo "docker.io could not be installed: the docker backend's tests will skip"
	exit 0
fi
log=${TMPDIR:-/tmp}/factory-test-dockerd.log
nohup dockerd --iptables=false --ip6tables=false --bridge=none --storage-driver=vfs \
	--data-root /var/lib/factory-test-docker --exec-root /run/factory-test-docker \
	--pidfile /run/factory-test-docker.pid >"$log" 2>&1 &
for _ in $(seq 1 60); do
	if ping; then
		echo "started a Docker daemon for the docker backend's tests (its log: $log)"
		exit 0
	fi
	sleep 0.5
done
echo "the Docker daemon did not start (its log: $log): the docker backend's tests will skip"
tail -5 "$log" 2>/dev/null
exit 0
