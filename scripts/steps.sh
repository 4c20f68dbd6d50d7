# Sourced by scripts/test: foreground steps that a signal stops at once.
# Each foreground step runs as a background job that the script waits for:
# bash runs a trap only between commands, so a SIGTERM sent to the script alone
# would wait for the running step to end. `wait` is cut short by the trap, which
# passes SIGTERM on to the step's whole process group (a background job ignores
# SIGINT in a non-interactive shell; the harness, and pytest's workers under the
# plugin, stop what they started on SIGTERM), waits for the step, and exits 130:
# on Ctrl-C, and on a SIGTERM to the script or its group. The step leads a
# session of its own (setsid), so that its group is its and its children's alone.
step_pid=""
run_step() { # COMMAND...: run in the background and waited for; its exit status
  local code=0
  setsid "$@" &
  step_pid=$!
  wait "$step_pid" || code=$?
  step_pid=""
  return "$code"
}
interrupted() {
  if [ -n "$step_pid" ]; then
    kill -TERM -- "-$step_pid" 2>/dev/null || kill -TERM "$step_pid" 2>/dev/null || true
    wait "$step_pid" 2>/dev/null || true
  fi
  exit 130
}
