#!/bin/sh
# monitor-run.sh CHECK COMMAND [ARGS...]
#
# Run COMMAND and report it to the monitor as one run, with POSIX sh and curl only (for machines
# without Python; `monitor-run` of the Python client does the same):
#   1. ping start (with a run id, and the tick from MONITOR_SCHEDULED_TIME when set), in the
#      background: COMMAND starts at once, however slow the monitor is to answer;
#   2. run COMMAND, its output passing through (stderr is merged into stdout here);
#   3. when it ends, wait for the start ping to finish (so the monitor gets the pings in order),
#      then ping its exit status with the last Ping-Body-Limit bytes of output (from the start
#      ping's answer; 100000 by default) as the body;
#   4. exit with COMMAND's status (128+N when signal N ended it).
# SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 are forwarded to COMMAND, SIGINT and SIGQUIT as SIGTERM
# (a background command of a non-interactive shell ignores those two); one that comes before
# COMMAND starts stops the job there: COMMAND is not run and the status is 128+N; one that comes
# after COMMAND ended does not stop the finish ping. The monitor being down never stops COMMAND: a failed
# ping prints one warning on stderr. The whole output passes through a temporary file (for its
# tail); a job printing gigabytes needs that much room in $TMPDIR.
#
# CHECK is a check's uuid, or its slug (then MONITOR_PING_KEY is needed).
# Environment:
#   MONITOR_BASE_URL        the monitor's address (default http://127.0.0.1:8000)
#   MONITOR_PING_KEY        the project's ping key, for a CHECK given by slug
#   MONITOR_SCHEDULED_TIME  the tick this run belongs to (sent as scheduled=)
#   MONITOR_RUN_ID          the run id to use when it is a UUID (default: a fresh UUID)
#   MONITOR_CHECK           set by an outer wrapper: MONITOR_SCHEDULED_TIME and MONITOR_RUN_ID
#                           are used only when it is unset or names CHECK (a nested job with
#                           its own check is not bound to the outer run); COMMAND gets
#                           MONITOR_CHECK=CHECK, MONITOR_RUN_ID and MONITOR_SCHEDULED_TIME
# COMMAND reads the wrapper's stdin.
#   MONITOR_CREATE=1        create a check named by slug if it is missing
#   MONITOR_TIMEOUT         seconds per ping attempt, and for its retries (default 10;
#                           a ping thus takes at most about twice this). When the start got
#                           no answer in it (a monitor that accepts connections and never
#                           answers), the finish gets 1 s, not another MONITOR_TIMEOUT: the
#                           wrapper exits about max(run time, MONITOR_TIMEOUT) + 1 s after it began
#   MONITOR_RETRIES         retries of a ping (default 3)

set -u

if [ "$#" -lt 2 ]; then
    echo "usage: monitor-run.sh CHECK COMMAND [ARGS...]" >&2
    exit 2
fi

# The traps go in first: a signal sent at any moment must reach the command (or stop the job),
# never end this shell with the default action and leave no finish ping behind.
#   - before the command starts, it is kept in $pending: the job was stopped before it began, so
#     the command is not started and the run ends as if the signal had ended it (128+N);
#   - from the command's fork until it runs as itself (its start mark, $work/started, exists),
#     it is kept too and passed on then: a child signalled earlier would take the signal for the
#     trap it inherited from this shell, and drop it;
#   - once the command has ended, it is not passed on (the pid may be another process's by
#     then): the finish ping goes out, and the wrapper exits with the command's status.
# (A command started by this shell gets the default action for the signals trapped here, POSIX.)
interrupted=0
child=""
pending=""
work=""
# deliver: pass the pending signal on, if the command runs as itself by now.
deliver() {
    if [ -n "$pending" ] && [ -n "$child" ] && [ -e "$work/started" ]; then
        kill "-$pending" "$child" 2>/dev/null
        pending=""
    fi
}
# shellcheck disable=SC2329 # called by the signal traps
forward() {
    interrupted=1
    pending=$1
    deliver
}
trap 'forward TERM' TERM
# A background command of a non-interactive shell ignores SIGINT (POSIX), so an interrupt is
# passed on as SIGTERM.
trap 'forward TERM' INT
trap 'forward HUP' HUP
# SIGQUIT likewise (ignored by a background command); the others as they are
trap 'forward TERM' QUIT
trap 'forward USR1' USR1
trap 'forward USR2' USR2

check=$1
shift
base=${MONITOR_BASE_URL:-http://127.0.0.1:8000}
base=${base%/}
timeout=${MONITOR_TIMEOUT:-10}
retries=${MONITOR_RETRIES:-3}
# seconds the finish may take once the start got no answer in its whole $timeout (as
# monitor-run's SILENT_FINISH_TIMEOUT): the job already waited that long for the monitor
silent_finish_timeout=1

# warn MESSAGE: one warning per wrapper run. The mark is a file, not a variable, because the
# start ping runs in a background subshell; set before $work exists, it falls back to a variable.
warned=0
warn() {
    if [ "$warned" -eq 0 ] && { [ -z "${work:-}" ] || [ ! -e "$work/warned" ]; }; then
        echo "monitor-run.sh: $1; the job goes on" >&2
        warned=1
        [ -z "${work:-}" ] || : >"$work/warned"
    fi
}

query=""
param() {
    if [ -z "$query" ]; then query="?$1"; else query="$query&$1"; fi
}

case $check in
    [0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F]-*-*-*-*)
        url="$base/ping/$check"
        ;;
    *)
        url="$base/ping/${MONITOR_PING_KEY:-}/$check"
        if [ "${MONITOR_CREATE:-0}" = 1 ]; then
            param "create=1"
        fi
        if [ -z "${MONITOR_PING_KEY:-}" ]; then
            warn "$check is a slug and MONITOR_PING_KEY is not set"
            url=""
        fi
        ;;
esac

# the outer run's tick and id belong to its check only
inherit=1
if [ -n "${MONITOR_CHECK:-}" ] && [ "$(printf %s "$MONITOR_CHECK" | tr 'A-F' 'a-f')" != "$(printf %s "$check" | tr 'A-F' 'a-f')" ]; then
    inherit=0
fi
scheduled=""
rid=""
if [ "$inherit" -eq 1 ]; then
    scheduled=${MONITOR_SCHEDULED_TIME:-}
    rid=${MONITOR_RUN_ID:-}
fi
h='[0-9a-fA-F]'
h4="$h$h$h$h"
# shellcheck disable=SC2254 # the pattern is built from $h on purpose
case $rid in
    $h4$h4-$h4-$h4-$h4-$h4$h4$h4) ;;
    *) rid="" ;; # not a UUID: the monitor would refuse both pings
esac
if [ -z "$rid" ]; then
    if [ -r /proc/sys/kernel/random/uuid ]; then
        rid=$(cat /proc/sys/kernel/random/uuid)
    elif command -v uuidgen >/dev/null 2>&1; then
        rid=$(uuidgen | tr 'A-F' 'a-f')
    fi
fi
if [ -n "$rid" ]; then
    param "rid=$rid"
fi
if [ -n "$scheduled" ]; then
    param "scheduled=$scheduled"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/monitor-run.XXXXXX") || exit 70
# shellcheck disable=SC2329 # called by the EXIT trap
cleanup() {
    rm -rf "$work"
}
trap cleanup EXIT

# send_ping ACTION NAME SECONDS [BODY_FILE]: one ping, at most SECONDS per attempt, its answer's
# headers kept in $work/NAME.headers and curl's exit status in $work/NAME.rc; never fails the
# script.
send_ping() {
    [ -n "$url" ] || return 0
    target="$url$1$query"
    name=$2
    limit_s=$3
    if [ "$#" -ge 4 ]; then
        set -- --data-binary "@$4"
    else
        set -- --data-binary ""
    fi
    curl -fsS -m "$limit_s" --retry "$retries" --retry-connrefused --retry-max-time "$limit_s" \
        -o /dev/null -D "$work/$name.headers" -A "monitor-run.sh/0.1.0" "$@" "$target" 2>"$work/$name.err"
    rc=$?
    echo "$rc" >"$work/$name.rc"
    if [ "$rc" -ne 0 ]; then
        warn "ping not delivered ($(tr '\n' ' ' <"$work/$name.err"))"
    fi
}

# now_s: unix seconds, with a fraction where date has %N (GNU, busybox), else whole seconds.
now_s() {
    t=$(date +%s.%N 2>/dev/null)
    case $t in
        *[!0-9.]* | '' | *.) date +%s ;;
        *) printf '%s\n' "$t" ;;
    esac
}

# start_ping: the start ping; one that goes out 1 s or more after the command's start (this
# shell was stopped, or slow to fork) says when the command really started (started=,
# docs/design.md §5), so the monitor does not take the late arrival for the run's start.
start_ping() {
    sent=$(now_s)
    if awk -v a="$began" -v b="$sent" 'BEGIN { exit !(b - a >= 1) }' </dev/null; then
        param "started=$began"
    fi
    send_ping /start start "$timeout"
}

# The start ping goes in the background: a monitor that is slow, or accepts connections and
# never answers, holds up only the finish ping, never the job.
began=$(now_s)
start_ping </dev/null &
start_pid=$!

# The command writes into a FIFO that tee copies to our stdout and to the log: so the command
# runs in the background of this shell and its pid is known, for forwarding signals.
mkfifo "$work/out" || exit 70
tee "$work/log" <"$work/out" &
tee_pid=$!
export MONITOR_RUN_ID="$rid" MONITOR_CHECK="$check"
if [ -n "$scheduled" ]; then
    export MONITOR_SCHEDULED_TIME="$scheduled"
else
    unset MONITOR_SCHEDULED_TIME
fi
# A background command of a non-interactive shell reads /dev/null unless its stdin is
# redirected explicitly: hand it ours (fd 3, a copy of our stdin).
{ command exec 3<&0; } 2>/dev/null || exec 3</dev/null
if [ -z "$pending" ]; then
    # The child keeps this shell's traps until it execs the command (dash): it resets them
    # itself (INT and QUIT ignored, as for any background command), then makes the start mark.
    # By then it has opened the FIFO, so a signal passed on cannot stop it short of that (tee
    # would wait for a writer for ever).
    { trap - TERM HUP USR1 USR2; trap '' INT QUIT; : >"$work/started"; exec "$@"; } <&3 3<&- >"$work/out" 2>&1 &
    child=$!
else
    # `kill -l N` names signal N (POSIX); its number is what the status needs
    n=1
    while [ "$n" -lt 128 ] && [ "$(kill -l "$n" 2>/dev/null)" != "$pending" ]; do n=$((n + 1)); done
    echo "monitor-run.sh: SIG$pending came before the command started; it was not run" >&2
    # opens the FIFO (tee waits for a writer), then ends as the signal would have: 128+N
    { : >"$work/out"; exit $((128 + n)); } &
    child=$!
fi
exec 3<&-

while :; do
    interrupted=0
    # a signal that came before the command ran as itself: pass it on as soon as it does
    while [ -n "$pending" ] && [ ! -e "$work/started" ] && kill -0 "$child" 2>/dev/null; do
        sleep 0.01 2>/dev/null || sleep 1
    done
    deliver
    wait "$child"
    status=$?
    # `wait` ended by the command's exit: $status is its status
    [ "$interrupted" -eq 1 ] || break
    # a trapped signal ended `wait` early (status 128+N): wait again while the command runs
    kill -0 "$child" 2>/dev/null && continue
    # the command is gone; the shell may have reaped it already: ask for its stored status
    # (127 when `wait` above had it already)
    wait "$child"
    again=$?
    [ "$again" -eq 127 ] || status=$again
    break
done
child=""
wait "$tee_pid" 2>/dev/null
# the start ping has had the whole run to finish; the finish ping follows it, never overtakes it
# (a trapped signal ends `wait` early: wait again while the ping runs)
while kill -0 "$start_pid" 2>/dev/null; do
    wait "$start_pid" 2>/dev/null
done

if [ "$status" -gt 255 ]; then
    status=255
fi
limit=""
if [ -f "$work/start.headers" ]; then
    limit=$(tr -d '\r' <"$work/start.headers" | sed -n 's/^[Pp]ing-[Bb]ody-[Ll]imit: *\([0-9][0-9]*\).*/\1/p' | tail -n 1)
fi
limit=${limit:-100000}
tail -c "$limit" "$work/log" >"$work/tail"
# curl's 28: the start timed out with no (complete) answer, so the monitor is silent and the
# job has waited $timeout for it already; a quick refusal keeps the full $timeout (a restarting
# monitor may be back by then)
finish_timeout=$timeout
if [ "$(cat "$work/start.rc" 2>/dev/null)" = 28 ]; then
    finish_timeout=$(awk -v t="$timeout" -v s="$silent_finish_timeout" 'BEGIN { print (t + 0 < s) ? t : s }')
fi
send_ping "/$status" finish "$finish_timeout" "$work/tail"
exit "$status"
