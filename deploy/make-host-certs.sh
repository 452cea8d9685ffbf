#!/bin/sh
# TLS certificates for reverie-canary on hosts of their own (docs/deployment/hosts.md), openssl only:
#
#   sh deploy/make-host-certs.sh DIR NATS_NAMES REDIS_NAMES [DASHBOARD_NAMES] [DAYS]
#   sh deploy/make-host-certs.sh certs "DNS:nats1.internal,DNS:nats2.internal,DNS:nats3.internal" \
#        "DNS:redis.internal" "DNS:canary.example.com"
#
# Writes into DIR: a CA (ca.pem, ca-key.pem: keep the key offline), a server certificate for NATS
# (nats.pem: every name a client or another node dials, as subjectAltName entries), one for Redis
# (redis.pem), one for the dashboard's HTTPS (dashboard-web.pem, when DASHBOARD_NAMES is given), and
# a client certificate per service and tool, each its own identity (CN): discovery, prober, judge,
# router, notifier, dashboard, admin, operator, backend. Revoke or rotate one without touching the
# others. EC P-256 keys, mode 0600; DAYS (default 365). A CA of your own works as well: the services
# only need the CA's PEM (CANARY_NATS_CA_FILE, CANARY_REDIS_CA_FILE) and their own pair.
set -eu
if [ $# -lt 3 ]; then
  echo "usage: $0 DIR NATS_NAMES REDIS_NAMES [DASHBOARD_NAMES] [DAYS]   (names: DNS:host,IP:addr,...)" >&2
  exit 2
fi
dir="$1"; nats_names="$2"; redis_names="$3"; web_names="${4:-}"; days="${5:-365}"
mkdir -p "$dir"
cd "$dir"
umask 077
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

if [ ! -f ca.pem ]; then
  key ca-key.pem
  openssl req -x509 -new -key ca-key.pem -out ca.pem -days "$days" -subj "/CN=reverie-canary CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
fi

issue() {  # name, extended key usage, subject alternative names
  key "$1-key.pem"
  openssl req -new -key "$1-key.pem" -out "$1.csr" -subj "/CN=$1"
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=%s\nsubjectAltName=%s\n' \
    "$2" "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -out "$1.pem" -days "$days" \
    -extfile "$1.ext" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
  chmod 0644 "$1.pem"
}

# NATS's certificate serves its clients and, in a cluster, the other nodes' routes: both usages
issue nats "serverAuth,clientAuth" "$nats_names"
issue redis serverAuth "$redis_names"
if [ -n "$web_names" ]; then
  issue dashboard-web serverAuth "$web_names"
fi
for who in discovery prober judge router notifier dashboard admin operator backend; do
  issue "$who" clientAuth "DNS:canary-$who"
done
rm -f ca.srl
chmod 0644 ca.pem
echo "wrote $(pwd): ca.pem, nats.pem, redis.pem${web_names:+, dashboard-web.pem} and a client pair per service"
