# Sourced by scripts/test: a headless browser for the history page's test
# (tests/test_history_browser.py). The test command does its own set-up, so it
# installs Debian's chromium when no browser is there (about a minute, once)
# and makes a missing browser a test failure rather than a skip.
have_browser() {
  [ -n "${CHROMIUM:-}" ] && return 0
  local name
  for name in chromium chromium-browser google-chrome google-chrome-stable; do
    command -v "$name" >/dev/null 2>&1 && return 0
  done
  return 1
}
if ! have_browser && command -v apt-get >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo -n"
  echo "[trainjob-conformance] installing chromium for the history page's browser test" >&2
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
    && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
    || echo "[trainjob-conformance] could not install chromium; its test will fail" >&2
fi
export TRAINJOB_CONFORMANCE_REQUIRE_BROWSER=1
