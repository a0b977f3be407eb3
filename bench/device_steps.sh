# Sourced by the device scripts (device_run.sh, service_device_run.sh):
#   step NAME TIMEOUT CMD...
# runs CMD under `timeout`, logs to $STEP_LOGS/NAME.log and appends one line to
# the `summary` array: name, exit status, seconds, and the log's gtest result
# lines and sanitizer summaries.
summary=()
step() {
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  timeout "$limit" "$@" >"$STEP_LOGS/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-18s rc=%-3s %4ss  %s' "$name" "$rc" "$(($(date +%s) - t0))" "$(grep -E '^\[  (PASSED|FAILED|SKIPPED) |ERROR SUMMARY|RACECHECK SUMMARY|targets met' "$STEP_LOGS/$name.log" | tr '\n' ' ' | cut -c1-90)")")
}
