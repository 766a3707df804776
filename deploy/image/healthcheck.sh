#!/bin/bash
# The image's HEALTHCHECK: GET /health on the HTTP port answers 200. Plain bash (/dev/tcp), so the
# image needs no curl. Over TLS (--tls-cert) this probe cannot speak; use an orchestrator's probe.
exec 3<>"/dev/tcp/127.0.0.1/${FLASHSERVE_PORT:-8000}" || exit 1
printf 'GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' >&3
read -r -t 3 status <&3 || exit 1
[[ "$status" == "HTTP/1.1 200 "* ]]
