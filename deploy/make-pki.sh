#!/bin/sh
# Makes what daemons over TCP need (docs/deploy.md, "Daemons over TCP"): a CA, one certificate per
# daemon host name, and the shared secret, in DIR. Existing files are kept, so it can run at every
# `docker compose up`. Keep ca.key offline in a real deployment.
# Usage: make-pki.sh DIR HOST...
set -eu
dir=$1
shift
umask 077
cd "$dir"
if [ ! -f ca.pem ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
    -keyout ca.key -out ca.pem -subj /CN=mdvfs-ca 2>/dev/null
fi
for host in "$@"; do
  [ -f "$host.pem" ] && continue
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$host.key" -out "$host.csr" -subj "/CN=$host" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:%s\n' "$host" > "$host.ext"
  openssl x509 -req -in "$host.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 825 \
    -extfile "$host.ext" -out "$host.pem" 2>/dev/null
  rm -f "$host.csr" "$host.ext"
done
[ -f secret ] || openssl rand -hex 32 > secret
# Certificates and the CA are public; keys and the secret stay 0600.
chmod 0644 ca.pem ./*.pem
