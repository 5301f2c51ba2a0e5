#!/bin/sh
# A one-node Slurm for tests, on this machine, without systemd:
#
#   scripts/slurm-local.sh [start]   start it (or find it running); prints the
#                                    path of its slurm.conf: export SLURM_CONF=<that>
#   scripts/slurm-local.sh status    exit 0 when it is running and answers
#   scripts/slurm-local.sh stop      cancel its jobs, stop its daemons
#
# Everything lives in $TITAN_SLURM_DIR (default /tmp/titan-slurm): its own
# slurm.conf, its own munge key and munged socket, state, logs and pid files,
# so it neither needs nor disturbs a system Slurm or munge. Ports
# $TITAN_SLURM_PORT and the next one (default 6917/6918, not Slurm's 6817/6818).
# Needs root (slurmd starts tasks as the job's user) and the Debian packages
# slurmd, slurmctld, slurm-client, munge; srun --mpi=pmix also needs
# libpmix-dev (the plugin dlopens libpmix.so). Start runs again safely: a
# running cluster is left as it is, a half-started one is stopped and started
# afresh with its state wiped.
set -u
dir=${TITAN_SLURM_DIR:-/tmp/titan-slurm}
port=${TITAN_SLURM_PORT:-6917}
conf=$dir/slurm.conf
export SLURM_CONF="$conf"

say() { echo "slurm-local: $*" >&2; }
die() { say "$*"; exit 1; }

# pid NAME: the pid in $dir/NAME.pid if that process is alive and is NAME.
pid_of() {
    p=$(cat "$dir/$1.pid" 2>/dev/null) || return 1
    case $p in ''|*[!0-9]*) return 1 ;; esac
    [ "$(cat /proc/"$p"/comm 2>/dev/null)" = "$1" ] || return 1
    echo "$p"
}

running() {
    [ -f "$conf" ] && pid_of munged >/dev/null && pid_of slurmctld >/dev/null &&
        pid_of slurmd >/dev/null && timeout 5 sinfo -h -o %T >/dev/null 2>&1
}

# stop_daemons NAME...: SIGTERM to all at once (each takes 1-2 s to wind
# down), up to 10 s for them to exit, then SIGKILL.
stop_daemons() {
    pids=""
    for n in "$@"; do
        p=$(pid_of "$n") && kill "$p" 2>/dev/null && pids="$pids $p"
        rm -f "$dir/$n.pid"
    done
    i=0
    for p in $pids; do
        while [ -d /proc/"$p" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
        [ -d /proc/"$p" ] && kill -9 "$p" 2>/dev/null
    done
    return 0
}

stop() {
    # Jobs first, while slurmd can still end their steps (and tell srun).
    if pid_of slurmctld >/dev/null && [ -n "$(squeue -h -o %i 2>/dev/null)" ]; then
        scancel --quiet --user="$(id -un)" 2>/dev/null
        i=0
        while [ -n "$(squeue -h -o %i 2>/dev/null)" ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done
    fi
    stop_daemons slurmd slurmctld munged
    # Steps outliving their slurmd: ours inherited SLURM_CONF=$conf from it.
    for p in $(pgrep -x slurmstepd 2>/dev/null); do
        tr '\0' '\n' < /proc/"$p"/environ 2>/dev/null | grep -qx "SLURM_CONF=$conf" &&
            { pkill -9 -P "$p"; kill -9 "$p"; } 2>/dev/null
    done
    return 0
}

write_conf() {
    node=$(hostname -s)
    cpus=$(nproc)
    # MiB, a little under the total so slurmd never finds less than declared.
    mem=$(awk '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.95 }' /proc/meminfo)
    cat > "$conf.tmp" <<EOF
# Written by scripts/slurm-local.sh: a one-node Slurm for tests.
ClusterName=titan-local
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.sock
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
MailProg=/bin/true
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
PlugStackConfig=$dir/plugstack.conf
# Also where the pmix plugin makes its per-step directories (named by job id,
# which restarts at 1 with each fresh start: /tmp could hold stale ones).
TmpFS=$dir/tmp
# No cgroups: containers rarely let us have them.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# srun names --mpi=pmix itself; plain srun stays plain.
MpiDefault=none
SelectType=select/cons_tres
# Cores only: a job that asks for no memory must not take the node's all.
SelectTypeParameters=CR_Core
# Trust the node line below even where a container shows more or less.
SlurmdParameters=config_overrides
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=30
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus Sockets=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=$mem State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    mv "$conf.tmp" "$conf"
    : > "$dir/plugstack.conf"
}

# The last error a daemon logged, for a message; else its last line.
last_error() {
    e=$(grep -h -E 'error|fatal' "$dir/log/$1.log" 2>/dev/null | tail -n 1)
    [ -n "$e" ] || e=$(tail -n 1 "$dir/log/$1.log" 2>/dev/null)
    echo "${e:-nothing logged}" | sed 's/^\[[^]]*\] //'
}

# A failed start leaves nothing running (the logs stay, for reading).
start_failed() {
    say "$*"
    stop
    exit 1
}

# started NAME: each daemon forks and returns before its child writes the
# pid file (slurmd: some 15 ms later, longer on a loaded machine), so wait
# up to 10 s for a live NAME behind that file before calling it gone.
started() {
    i=0
    until pid_of "$1" >/dev/null; do
        [ $i -ge 100 ] && start_failed "$1 wrote no pid file in 10 s: $(last_error "$1") (log: $dir/log/$1.log)"
        sleep 0.1; i=$((i + 1))
    done
}

wait_idle() {
    end=$(($(date +%s) + 30))
    while [ "$(date +%s)" -lt $end ]; do
        for n in munged slurmctld slurmd; do
            pid_of $n >/dev/null ||
                start_failed "$n exited: $(last_error $n) (log: $dir/log/$n.log)"
        done
        st=$(timeout 5 sinfo -h -N -o %T 2>/dev/null | head -n 1)
        case $st in
        idle) return 0 ;;
        *drain*|down*|inval*|fail*)
            [ "$(date +%s)" -gt $((end - 25)) ] &&
                start_failed "node state '$st': $(sinfo -h -N -o %E 2>/dev/null); logs in $dir/log" ;;
        esac
        sleep 0.1
    done
    start_failed "node not idle after 30 s (state '${st:-no answer}'); logs in $dir/log"
}

start() {
    for b in munged mungekey slurmctld slurmd sinfo srun scancel; do
        command -v $b >/dev/null 2>&1 ||
            die "$b not found (Debian: apt-get install slurmd slurmctld slurm-client munge)"
    done
    if running; then say "already running, conf $conf"; echo "$conf"; return 0; fi
    [ "$(id -u)" -eq 0 ] || die "needs root (slurmd runs tasks as the job's user)"
    stop
    rm -rf "$dir/ctld" "$dir/spool" "$dir/tmp" "$dir/log"
    # munged wants its socket's directory searchable by all, its key private.
    mkdir -p "$dir/ctld" "$dir/spool" "$dir/tmp" "$dir/log" "$dir/munge" || die "cannot create $dir"
    chmod 1777 "$dir/tmp"
    chmod 0755 "$dir"; chmod 0700 "$dir/munge"
    if [ ! -s "$dir/munge/munge.key" ]; then
        mungekey -c -k "$dir/munge/munge.key" || die "mungekey failed"
    fi
    write_conf
    munged --key-file="$dir/munge/munge.key" --socket="$dir/munge.sock" --origin=127.0.0.1 \
        --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" \
        --seed-file="$dir/munge/munged.seed" 8>&- 9>&- ||
        start_failed "munged did not start: $(tail -n 1 "$dir/log/munged.log" 2>/dev/null)"
    started munged
    # -c: no state from an earlier run; -i: a half-written state file is no reason to stop.
    slurmctld -c -i 8>&- 9>&- || start_failed "slurmctld did not start: $(last_error slurmctld)"
    started slurmctld
    slurmd 8>&- 9>&- || start_failed "slurmd did not start: $(last_error slurmd)"
    started slurmd
    wait_idle
    say "running: node $(hostname -s), $(nproc) CPUs, conf $conf"
    echo "$conf"
}

# start and stop one at a time (fd 8; the daemons must not inherit it, nor
# fd 9, which tests/cli/dist_slurm.sh locks).
lock() {
    command -v flock >/dev/null 2>&1 || return 0
    exec 8>"$dir.lock" || die "cannot open $dir.lock"
    flock -w 60 8 || die "$dir.lock: held by another start or stop for 60 s"
}

case ${1:-start} in
start) lock; start ;;
stop) lock; stop ;;
status) running ;;
*) echo "usage: $0 [start|stop|status]" >&2; exit 2 ;;
esac
