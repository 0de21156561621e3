#!/usr/bin/env bash
# Installs what the tests and the demo need on a fresh Debian machine (idempotent; needs root).
set -euo pipefail
need=()
command -v tshark >/dev/null 2>&1 || need+=(tshark)
/usr/bin/python3 -c 'import scapy' >/dev/null 2>&1 || need+=(python3-scapy)
/usr/bin/python3 -c 'import pytest' >/dev/null 2>&1 || need+=(python3-pytest)
/usr/bin/python3 -c 'import torch' >/dev/null 2>&1 || need+=(python3-torch)
/usr/bin/python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
/usr/bin/python3 -c 'import setuptools' >/dev/null 2>&1 || need+=(python3-setuptools)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v ethtool >/dev/null 2>&1 || need+=(ethtool)
command -v iperf3 >/dev/null 2>&1 || need+=(iperf3)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
[ -e /usr/lib/x86_64-linux-gnu/libpcap.so.0.8 ] || need+=(libpcap0.8)
# The bed's ECN marker (scripts/lib/ecn_marker.c, scripts/testbed.sh ecn on) is a tc bpf program built with clang.
command -v clang >/dev/null 2>&1 || need+=(clang)
[ -e /usr/include/bpf/bpf_helpers.h ] || need+=(libbpf-dev)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing ${need[*]}; run as root or install them" >&2
    exit 1
  fi
  echo "setup: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
[ -x /usr/lib/jvm/temurin-25-jdk-amd64/bin/java ] || { echo "setup: JDK 25 not found at /usr/lib/jvm/temurin-25-jdk-amd64" >&2; exit 1; }
