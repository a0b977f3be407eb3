# Sourced by the device scripts (device_run.sh, service_device_run.sh):
#   step NAME TIMEOUT CMD...
# runs CMD under `timeout`, logs to $STEP_LOGS/NAME.log and appends one line to
# the `summary` array: name, exit status, seconds, and the log's gtest result
# lines and sanitizer summaries.
#
# Two variables split one script's steps over several device calls:
#   STEPS=REGEX   run only the steps whose NAME matches (grep -E); others are
#                 left out silently
#   DEADLINE=S    all steps within S seconds of the first `step`: a step's
#                 timeout is cut to the time left, and one that would start
#                 with under 15 s left is skipped and said so
summary=()
_steps_t0=
step() {
  local name=$1 limit=$2; shift 2
  if [ -n "${STEPS:-}" ] && ! grep -qE "$STEPS" <<<"$name"; then return 0; fi
  [ -n "$_steps_t0" ] || _steps_t0=$(date +%s)
  if [ -n "${DEADLINE:-}" ]; then
    local left=$((DEADLINE - ($(date +%s) - _steps_t0)))
    if [ "$left" -lt 15 ]; then summary+=("$(printf '%-18s skipped (deadline)' "$name")"); return 0; fi
    [ "$limit" -gt "$left" ] && limit=$left
  fi
  local t0=$(date +%s)
  timeout "$limit" "$@" >"$STEP_LOGS/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-18s rc=%-3s %4ss  %s' "$name" "$rc" "$(($(date +%s) - t0))" "$(grep -E '^\[  (PASSED|FAILED|SKIPPED) |ERROR SUMMARY|RACECHECK SUMMARY|targets met|[0-9]+ (passed|failed|errors?)' "$STEP_LOGS/$name.log" | tr '\n' ' ' | cut -c1-90)")")
}
