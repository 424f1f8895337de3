#!/bin/sh
# A fake service for config.example.yaml's tools: `status SERVICE`,
# `restart SERVICE ENVIRONMENT` and `page TEXT`. No network; its state is
# files under ./.airlock-example/ in the working directory, nothing else.
set -eu

dir=.airlock-example
service() {
	case "$1" in
	api | web | worker) ;;
	*)
		echo "unknown service: $1 (api, web or worker)" >&2
		exit 2
		;;
	esac
}

case "${1:-}" in
status)
	service "${2:-}"
	since=never
	if [ -f "$dir/$2.restarted" ]; then since=$(cat "$dir/$2.restarted"); fi
	printf '{"service":"%s","status":"up","restarted":"%s"}\n' "$2" "$since"
	;;
restart)
	service "${2:-}"
	case "${3:-}" in
	staging | production) ;;
	*)
		echo "unknown environment: ${3:-} (staging or production)" >&2
		exit 2
		;;
	esac
	mkdir -p "$dir"
	date -u +%Y-%m-%dT%H:%M:%SZ >"$dir/$2.restarted"
	printf '{"service":"%s","environment":"%s","restarted":true}\n' "$2" "$3"
	;;
page)
	mkdir -p "$dir"
	printf '%s\n' "${2:-}" >>"$dir/pages.log"
	echo "paged on-call (written to $dir/pages.log)"
	;;
*)
	echo "usage: $0 status SERVICE | restart SERVICE ENVIRONMENT | page TEXT" >&2
	exit 2
	;;
esac
