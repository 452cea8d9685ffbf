#!/bin/sh
# Throwaway TLS certificates for compose.tls.yaml, made with openssl only:
#
#   sh deploy/make-certs.sh certs          # -> certs/ca.pem, nats.pem, redis.pem, client.pem (+ *-key.pem)
#
# A CA (ca.pem, ca-key.pem), a server certificate for each of the compose services `nats` and
# `redis` (also valid for localhost and 127.0.0.1), and one client certificate that the canary's
# services present (both servers require one: mutual TLS). EC P-256 keys, valid DAYS days
# (second argument, default 365). Keys are written mode 0600. For anything beyond one host, use
# your own CA and issue one client certificate per service.
set -eu
dir="${1:-certs}"
days="${2:-365}"
mkdir -p "$dir"
cd "$dir"
umask 077
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

key ca-key.pem
openssl req -x509 -new -key ca-key.pem -out ca.pem -days "$days" -subj "/CN=reverie-canary test CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"

issue() {  # name, extended key usage, subject alternative names
  key "$1-key.pem"
  openssl req -new -key "$1-key.pem" -out "$1.csr" -subj "/CN=$1"
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=%s\nsubjectAltName=%s\n' \
    "$2" "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -out "$1.pem" -days "$days" \
    -extfile "$1.ext" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

issue nats serverAuth "DNS:nats,DNS:localhost,IP:127.0.0.1"
issue redis serverAuth "DNS:redis,DNS:localhost,IP:127.0.0.1"
issue client clientAuth "DNS:canary-client"
rm -f ca.srl
chmod 0644 ca.pem nats.pem redis.pem client.pem
echo "wrote $(pwd): ca.pem nats.pem redis.pem client.pem and their keys"
