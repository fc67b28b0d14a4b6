#!/usr/bin/env bash
# Install the system packages Loader Advisor needs, and only those that are missing.
#   scripts/system-deps.sh          build: C++ compiler, cmake, libcurl (OpenSSL) and OpenSSL headers
#   scripts/system-deps.sh --test   also Debian's chromium for the browser tests
# On a machine that already has everything this does nothing and takes well under a second.
set -euo pipefail

want_test=0
[[ "${1:-}" == "--test" ]] && want_test=1

missing=()
command -v c++ >/dev/null 2>&1 || missing+=(g++)
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v ninja >/dev/null 2>&1 || command -v make >/dev/null 2>&1 || missing+=(make)
# libcurl headers: curl-config ships with every -dev flavour; we want the OpenSSL one.
command -v curl-config >/dev/null 2>&1 || missing+=(libcurl4-openssl-dev)
[[ -f /usr/include/openssl/evp.h || -n "${CONDA_PREFIX:-}" ]] || missing+=(libssl-dev)
if (( want_test )); then
  command -v chromium >/dev/null 2>&1 || [[ -x /usr/bin/chromium ]] || missing+=(chromium)
fi

(( ${#missing[@]} == 0 )) && exit 0

echo "system-deps: installing missing packages: ${missing[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "system-deps: no apt-get here; please install: ${missing[*]} (or use environment.yml with conda)" >&2
  exit 1
fi
sudo=""
if (( EUID != 0 )); then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "system-deps: need root or sudo to install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
