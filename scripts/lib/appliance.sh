# shellcheck shell=bash
# Sourced by the test-bed scripts (demo.sh, train.sh, bench-session.sh): the appliance's configuration for one
# fp32 ring of the bed's workers, and the daemon started in the appliance namespace.

# NETREDUCE_PORT_TYPE (af_packet or af_xdp, default: the daemon's default, af_packet) sets ports[].type in the
# configurations written here, e.g. `NETREDUCE_PORT_TYPE=af_xdp scripts/demo.sh` (or demo.sh --port-type af_xdp).

# bed_port_type_line: the port's "type:" line for the configurations, or nothing
bed_port_type_line() {
  [ -n "${NETREDUCE_PORT_TYPE:-}" ] && printf '      type: %s\n' "$NETREDUCE_PORT_TYPE"
  return 0
}

# bed_ring_config FILE API JOB WORKERS RING_ID WINDOW MSG_LEN PAYLOAD [IDLE]
#   writes a daemon configuration: port eth0 (MTU 9000), API on API (unix:PATH), one job JOB with one fp32 ring
#   RING_ID of the workers 10.77.0.1..WORKERS in rank order, PMTU = PAYLOAD; IDLE sets the dataplane idle strategy.
bed_ring_config() {
  local file="$1" api="$2" job="$3" workers="$4" ring_id="$5" window="$6" msg_len="$7" payload="$8" idle="${9:-}"
  {
    printf 'appliance:\n  ports:\n    - name: eth0\n      mtu: 9000\n'
    bed_port_type_line
    printf '  memoryBudget: 256MiB\n'
    [ -n "$idle" ] && printf '  dataplane:\n    idleStrategy: %s\n' "$idle"
    printf '  api:\n    listen: %s\n  metrics:\n    listen: 127.0.0.1:0\n' "$api"
    printf 'jobs:\n  - name: %s\n    rings:\n      - id: %s\n        elementType: fp32\n' "$job" "$ring_id"
    printf '        window: %s\n        msgLen: %s\n        payloadSize: %s\n        pmtu: %s\n        members:\n' \
      "$window" "$msg_len" "$payload" "$payload"
    local i
    for i in $(seq 0 $(( workers - 1 ))); do
      printf '          - { rank: %d, ip: 10.77.0.%d }\n' "$i" $(( i + 1 ))
    done
  } > "$file"
}

# bed_start_daemon PREFIX NETREDUCE CONFIG API WORKDIR NAME
#   starts `netreduce daemon` in namespace PREFIX-app (log WORKDIR/daemon.log), sets daemon_pid, and waits until
#   its API lists the rings (printed); exits 1 with the daemon's log if it dies first.
# bed_switchml_config FILE API IDLE [JOB_WORKERS ELEMENTS POOL]: an appliance that serves SwitchML from the bed's
# SwitchML address (10.77.0.254, the appliance port's MAC), with the controller on the management interface
# (10.77.0.253:50099, open to the bed's workers); with JOB_WORKERS also a configured job "switchml" of ranks
# 0..JOB_WORKERS-1 (for workers that do not register through the controller).
bed_switchml_config() {
  local file="$1" api="$2" idle="${3:-}" job_workers="${4:-0}" elements="${5:-256}" pool="${6:-512}"
  {
    printf 'appliance:\n  ports:\n    - name: eth0\n      mtu: 9000\n'
    bed_port_type_line
    printf '  memoryBudget: 256MiB\n'
    [ -n "$idle" ] && printf '  dataplane:\n    idleStrategy: %s\n' "$idle"
    printf '  api:\n    listen: %s\n  metrics:\n    listen: 127.0.0.1:0\n' "$api"
    printf '  switchml:\n    mac: "02:77:00:00:00:fe"\n    ip: 10.77.0.254\n'
    printf '    controller:\n      listen: 10.77.0.253:50099\n      allow: [10.77.0.0/24]\n'
    if [ "$job_workers" -gt 0 ]; then
      printf 'jobs:\n  - name: switchml\n    switchml:\n      elementsPerPacket: %s\n      poolSize: %s\n' \
        "$elements" "$pool"
      printf '      workers:\n'
      local i
      for i in $(seq 0 $(( job_workers - 1 ))); do
        printf '        - { rank: %d, ip: 10.77.0.%d }\n' "$i" $(( i + 1 ))
      done
    fi
  } > "$file"
}

bed_start_daemon() {
  local prefix="$1" netreduce="$2" config="$3" api="$4" work="$5" name="$6"
  ip netns exec "${prefix}-app" "$netreduce" daemon --config "$config" > "$work/daemon.log" 2>&1 &
  daemon_pid=$!
  local _
  for _ in $(seq 240); do
    "$netreduce" ctl --api "$api" --timeout 1 rings > "$work/rings.txt" 2>/dev/null && break
    kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/daemon.log" >&2; echo "$name: daemon exited" >&2; exit 1; }
    sleep 0.5
  done
  cat "$work/rings.txt"
}

# bed_stop_daemon: stop the daemon bed_start_daemon started ($daemon_pid): SIGTERM, up to 5 s for it to exit, then
# SIGKILL; clears daemon_pid (a bench that restarts the daemon per mode calls it between modes).
bed_stop_daemon() {
  if [ -n "${daemon_pid:-}" ]; then
    kill "$daemon_pid" 2>/dev/null || true
    local _
    for _ in $(seq 50); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$daemon_pid" 2>/dev/null || true
    daemon_pid=""
  fi
}

# Multi-rack (testbed.sh --racks): one topology file for every appliance, each daemon taking its role by name.

# bed_leaf_name K: the leaf appliance of rack K (leaf-a, leaf-b, ...)
bed_leaf_name() { printf 'leaf-%b' "\\x$(printf '%x' $(( 97 + $1 )))"; }

# bed_racks_config FILE API_PORT TOKEN JOB WORKERS RACKS RING_ID WINDOW MSG_LEN PAYLOAD [IDLE]
#   writes the topology file of a ring of the bed's workers 10.77.0.1..WORKERS split into RACKS racks of
#   consecutive ranks (leaves leaf-a, leaf-b, ..., spine "spine"). The API listens on 127.0.0.1:API_PORT with
#   bearer token file TOKEN: every appliance namespace has its own loopback, so one address serves all daemons
#   (reach each with `ip netns exec NS netreduce ctl --api 127.0.0.1:API_PORT --token-file TOKEN`).
bed_racks_config() {
  local file="$1" port="$2" token="$3" job="$4" workers="$5" racks="$6" ring_id="$7" window="$8" msg_len="$9"
  local payload="${10}" idle="${11:-}" per=$(( $5 / $6 )) i k
  {
    printf 'appliance:\n  ports:\n    - name: eth0\n      mtu: 9000\n'
    bed_port_type_line
    printf '  memoryBudget: 256MiB\n'
    [ -n "$idle" ] && printf '  dataplane:\n    idleStrategy: %s\n' "$idle"
    printf '  api:\n    listen: 127.0.0.1:%s\n    tokenFile: %s\n  metrics:\n    listen: 127.0.0.1:0\n' "$port" "$token"
    printf 'jobs:\n  - name: %s\n    rings:\n      - id: %s\n        elementType: fp32\n' "$job" "$ring_id"
    printf '        window: %s\n        msgLen: %s\n        payloadSize: %s\n        pmtu: %s\n        members:\n' \
      "$window" "$msg_len" "$payload" "$payload"
    for i in $(seq 0 $(( workers - 1 ))); do
      printf '          - { rank: %d, ip: 10.77.0.%d }\n' "$i" $(( i + 1 ))
    done
    printf '        spine: spine\n        racks:\n'
    for k in $(seq 0 $(( racks - 1 ))); do
      printf '          - { leaf: %s, ranks: [%s] }\n' "$(bed_leaf_name "$k")" \
        "$(seq -s ', ' $(( k * per )) $(( k * per + per - 1 )))"
    done
  } > "$file"
}

# Several aggregation trees per job (testbed.sh --trees): one topology file, each tree's ring naming its appliance.

# bed_tree_name T: the appliance of tree T (tree-a, tree-b, ...)
bed_tree_name() { printf 'tree-%b' "\\x$(printf '%x' $(( 97 + $1 )))"; }

# bed_trees_config FILE API_PORT TOKEN JOB WORKERS TREES RING_ID WINDOW MSG_LEN PAYLOAD [IDLE]
#   writes the topology file of one job over TREES trees of the bed's workers 10.77.0.1..WORKERS: ring RING_ID + t
#   (fp32) names its appliance tree-a, tree-b, ...; API and token as bed_racks_config.
bed_trees_config() {
  local file="$1" port="$2" token="$3" job="$4" workers="$5" trees="$6" ring_id="$7" window="$8" msg_len="$9"
  local payload="${10}" idle="${11:-}" i t
  {
    printf 'appliance:\n  ports:\n    - name: eth0\n      mtu: 9000\n'
    bed_port_type_line
    printf '  memoryBudget: 256MiB\n'
    [ -n "$idle" ] && printf '  dataplane:\n    idleStrategy: %s\n' "$idle"
    printf '  api:\n    listen: 127.0.0.1:%s\n    tokenFile: %s\n  metrics:\n    listen: 127.0.0.1:0\n' "$port" "$token"
    printf 'jobs:\n  - name: %s\n    rings:\n' "$job"
    for t in $(seq 0 $(( trees - 1 ))); do
      printf '      - id: %s\n        appliance: %s\n        elementType: fp32\n' $(( ring_id + t )) "$(bed_tree_name "$t")"
      printf '        window: %s\n        msgLen: %s\n        payloadSize: %s\n        pmtu: %s\n        members:\n' \
        "$window" "$msg_len" "$payload" "$payload"
      for i in $(seq 0 $(( workers - 1 ))); do
        printf '          - { rank: %d, ip: 10.77.0.%d }\n' "$i" $(( i + 1 ))
      done
    done
  } > "$file"
}

# bed_racks_spec WORKERS RACKS: the racks as `worker allreduce --racks` takes them (0-1,2-3)
bed_racks_spec() {
  local per=$(( $1 / $2 )) k spec=""
  for k in $(seq 0 $(( $2 - 1 ))); do spec="${spec:+$spec,}$(( k * per ))-$(( k * per + per - 1 ))"; done
  echo "$spec"
}

# bed_start_named_daemon NS NETREDUCE CONFIG NAME API_PORT TOKEN LOG
#   starts `netreduce daemon --name NAME` in namespace NS (log LOG), sets daemon_pid, and waits until its API
#   answers (prints its rings); exits 1 with the daemon's log if it dies first.
bed_start_named_daemon() {
  local ns="$1" netreduce="$2" config="$3" name="$4" port="$5" token="$6" log="$7"
  ip netns exec "$ns" "$netreduce" daemon --config "$config" --name "$name" > "$log" 2>&1 &
  daemon_pid=$!
  local _
  for _ in $(seq 240); do
    ip netns exec "$ns" "$netreduce" ctl --api "127.0.0.1:$port" --token-file "$token" --timeout 1 rings \
      > "$log.rings" 2>/dev/null && break
    kill -0 "$daemon_pid" 2>/dev/null || { cat "$log" >&2; echo "$name: daemon exited" >&2; exit 1; }
    sleep 0.5
  done
  echo "-- $name ($ns)"
  cat "$log.rings"
}

# bed_start_agents PREFIX LAUNCHER WORKDIR WORKERS WHO [JAVA_OPTS]
#   starts one sidecar agent (`worker agent --dev eth0`) in each worker namespace PREFIX-w0.., its socket
#   WORKDIR/agent-I.sock, its output in WORKDIR/agent-I.out and .log, appends their pids to agent_pids (the caller
#   stops them) and waits up to 60 s for every one to listen (their start warm-ups run at once on the bed's cores);
#   exits 1, naming WHO, if one does not. JAVA_OPTS: the agents' JVM flags, @I@ standing for the agent's index.
#   NETREDUCE_AGENT_OPTIONS in the environment adds options to their command lines. Prints their warm-up lines on
#   standard error.
bed_start_agents() {
  local prefix="$1" launcher="$2" work="$3" workers="$4" who="$5" java_opts="${6:-}" i _
  for i in $(seq 0 $(( workers - 1 ))); do
    # shellcheck disable=SC2086 # NETREDUCE_AGENT_OPTIONS: more of the agents' options, e.g. their warm-up's size
    ip netns exec "${prefix}-w$i" env ${java_opts:+NETREDUCE_JAVA_OPTS="${java_opts//@I@/$i}"} \
      "$launcher" worker agent --dev eth0 --socket "$work/agent-$i.sock" ${NETREDUCE_AGENT_OPTIONS:-} \
      > "$work/agent-$i.out" 2> "$work/agent-$i.log" &
    agent_pids+=($!)
  done
  for i in $(seq 0 $(( workers - 1 ))); do
    for _ in $(seq 600); do grep -q '^listening' "$work/agent-$i.out" 2>/dev/null && break; sleep 0.1; done
    grep -q '^listening' "$work/agent-$i.out" ||
      { echo "$who: agent $i did not start" >&2; cat "$work/agent-$i.log" >&2; exit 1; }
  done
  grep -h "warm-up" "$work"/agent-*.log >&2 || true
}

# bed_stop PREFIX WORKDIR
#   stops the daemon bed_start_daemon started (daemon_pid), takes the bed down and removes WORKDIR: a benchmark's
#   EXIT trap.
bed_stop() {
  if [ -n "${daemon_pid:-}" ]; then
    kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null || true
  fi
  bash scripts/testbed.sh down --prefix "$1" >/dev/null 2>&1 || true
  rm -rf "$2"
}
