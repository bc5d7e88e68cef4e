#!/usr/bin/env bash
# Installs Debian's chromium for the browser tests when it is missing and we are root.
# Never fatal: without a browser the browser tests skip with a reason
# (or fail, when RNNVIZ_REQUIRE_BROWSER=1, as .ci/run sets).
if [ -x /usr/bin/chromium ]; then exit 0; fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-browser: /usr/bin/chromium missing and not root with apt-get; browser tests will skip" >&2
  exit 0
fi
echo "ensure-browser: installing chromium (Debian package)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null && apt-get install -y -qq chromium chromium-driver >/dev/null \
  || echo "ensure-browser: apt-get install chromium failed; browser tests will skip" >&2
exit 0
