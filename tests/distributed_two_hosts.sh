#!/bin/sh
# Two ranks on two "hosts" joined by TCP only: two network namespaces on this machine, a veth pair
# between them (10.77.0.1 and 10.77.0.2), and Open MPI launching the second rank through an rsh
# agent that maps a host to `ip netns exec` where a real cluster would use ssh (docs/distributed.md,
# "Across hosts"). Needs root (CAP_NET_ADMIN) and iproute2; exits 77, which ctest reports as
# skipped, where network namespaces cannot be made.
#   distributed_two_hosts.sh same-result MPIRUN TEST_DISTRIBUTED_MPI
#       the MPI test suite across the two hosts: the same results as in one process
#   distributed_two_hosts.sh link-down MPIRUN DISTRIBUTED_FAILURES
#       ranks allreduce until the link goes down: rank 0's allreduce must time out within 20 s,
#       naming rank 1 when the link went down between collectives, or saying that every rank
#       reached it when it went down inside one (rank 1's announcement had crossed already). Open MPI cannot abort a job over a dead link (the far daemon never hears of
#       it), so the script then ends both hosts' processes itself.
mode=$1
mpirun=$2
program=$3
tag=$$
host_a=ember_a_$tag
host_b=ember_b_$tag
work=$(mktemp -d) || exit 1

end_hosts() {
  for ns in $host_a $host_b; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$work"
}
trap end_hosts EXIT

if ! command -v ip >/dev/null 2>&1 || ! ip netns add "$host_a" 2>/dev/null; then
  echo "distributed_two_hosts: skipped: cannot create network namespaces here (needs iproute2 and root)"
  exit 77
fi
ip netns add "$host_b" &&
  ip link add "ea$tag" type veth peer name "eb$tag" &&
  ip link set "ea$tag" netns "$host_a" && ip link set "eb$tag" netns "$host_b" &&
  ip -n "$host_a" addr add 10.77.0.1/24 dev "ea$tag" && ip -n "$host_b" addr add 10.77.0.2/24 dev "eb$tag" &&
  ip -n "$host_a" link set lo up && ip -n "$host_b" link set lo up &&
  ip -n "$host_a" link set "ea$tag" up && ip -n "$host_b" link set "eb$tag" up || {
  echo "distributed_two_hosts: skipped: cannot build the two hosts' network"
  exit 77
}

# The agent Open MPI runs as `agent HOST COMMAND...` to start its daemon on HOST.
cat >"$work/agent" <<EOF
#!/bin/sh
host=\$1
shift
case \$host in
  10.77.0.1) exec ip netns exec $host_a sh -c "\$*" ;;
  10.77.0.2) exec ip netns exec $host_b sh -c "\$*" ;;
esac
echo "agent: unknown host \$host" >&2
exit 1
EOF
chmod +x "$work/agent"
printf '10.77.0.1 slots=1\n10.77.0.2 slots=1\n' >"$work/hosts"

# mpirun runs on the first host; both the daemons' channel and the ranks' messages use TCP on the
# veth pair only.
launch() {
  ip netns exec "$host_a" "$mpirun" --allow-run-as-root -np 2 --hostfile "$work/hosts" \
    --mca plm_rsh_agent "$work/agent" --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 \
    --mca oob_tcp_if_include 10.77.0.0/24 -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY=PASSIVE "$@"
}

# Waits up to $2 seconds for the text $1 in the run's output.
wait_for() {
  i=0
  while [ "$i" -lt $(($2 * 10)) ]; do
    grep -qF -- "$1" "$work/out" && return 0
    sleep 0.1
    i=$((i + 1))
  done
  return 1
}

case $mode in
  same-result)
    launch "$program" </dev/null
    ;;
  link-down)
    launch "$program" link </dev/null >"$work/out" 2>&1 &
    if ! wait_for "rank 1: allreducing" 20; then
      cat "$work/out"
      echo "distributed_two_hosts: the ranks did not start allreducing within 20 s" >&2
      exit 1
    fi
    ip -n "$host_a" link set "ea$tag" down
    wait_for "timed out after 2 s on rank 0: " 20
    found=$?
    cat "$work/out"
    if [ "$found" -ne 0 ]; then
      echo "distributed_two_hosts: rank 0 did not time out within 20 s of the link going down" >&2
      exit 1
    fi
    if grep -qF "timed out after 2 s on rank 0: rank 1 " "$work/out"; then
      echo "distributed_two_hosts: ok: rank 0 timed out naming rank 1"
    elif grep -qF "timed out after 2 s on rank 0: every rank reached it" "$work/out"; then
      echo "distributed_two_hosts: ok: rank 0 timed out inside a collective every rank had reached"
    else
      echo "distributed_two_hosts: rank 0 timed out with neither diagnosis" >&2
      exit 1
    fi
    ;;
  *)
    echo "distributed_two_hosts: unknown mode '$mode' (same-result or link-down)" >&2
    exit 2
    ;;
esac
