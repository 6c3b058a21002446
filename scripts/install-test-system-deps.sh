#!/usr/bin/env bash
# Install the test-only system packages from Debian when they are missing:
# Chromium (HTML report checks), Slurm + munge (sweep tests), strace (collector coverage).
set -u
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v slurmctld >/dev/null 2>&1 || need+=(slurm-wlm)
command -v munged >/dev/null 2>&1 || need+=(munge)
command -v strace >/dev/null 2>&1 || need+=(strace)
command -v cc >/dev/null 2>&1 || need+=(gcc)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "iodiag: note: missing test packages (${need[*]}); tests that need them will be skipped." >&2
  echo "iodiag: install them with: sudo apt-get install ${need[*]}" >&2
  exit 0
fi
echo "iodiag: installing test packages: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null 2>&1 || true
if ! apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1; then
  echo "iodiag: note: could not install ${need[*]}; tests that need them will be skipped." >&2
fi
exit 0
