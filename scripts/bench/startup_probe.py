"""scripts/bench-startup.sh's timers for the JVMs' start-up, from the exec of the `netreduce` launcher.

  daemon NETNS LAUNCHER CONFIG API LOG: start `netreduce daemon` in NETNS and time it until its control API (API,
      unix:/path) answers GET /v1/rings/1/parameters with 200 (polled every 10 ms), and until its log says the
      dataplane warmed up, and the JVM's CPU time (user + system) until it answered; print one JSON line, leave the
      daemon running (its pid in the line).
  serve LAUNCHER: start `netreduce worker serve` on lo and time it until its "listening" line (as the Python
      package's sidecar transport waits for it), and its CPU time until then; print one JSON line.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

from netreduce.control import ApplianceClient  # noqa: E402
from netreduce.errors import NetReduceError  # noqa: E402


def cpu_seconds(pid: int) -> float:
    """user + system CPU time of process ``pid`` so far (its threads included)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def daemon(netns: str, launcher: str, config: str, api: str, log_path: str) -> int:
    log = open(log_path, "wb")
    start = time.perf_counter()
    process = subprocess.Popen(["ip", "netns", "exec", netns, launcher, "daemon", "--config", config], stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    client = ApplianceClient(api, timeout=2.0)
    ready = None
    while time.perf_counter() - start < 120:
        if process.poll() is not None:
            print(json.dumps({"error": f"daemon exited with {process.returncode}"}))
            return 1
        try:
            status, _ = client.request("GET", "/v1/rings/1/parameters")
            if status == 200:
                ready = time.perf_counter() - start
                cpu = cpu_seconds(process.pid)
                break
        except NetReduceError:
            pass
        time.sleep(0.01)
    if ready is None:
        print(json.dumps({"error": "the daemon's API did not answer within 120 s"}))
        return 1
    log.flush()
    with open(log_path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    warm = re.search(r"dataplane warmed up in (\d+) ms", text)
    print(json.dumps({"pid": process.pid, "daemon_ready_s": round(ready, 3), "daemon_cpu_s": round(cpu, 2),
                      "dataplane_warm_up_ms": int(warm.group(1)) if warm else None}))
    return 0


def serve(launcher: str) -> int:
    with tempfile.TemporaryDirectory() as work:
        socket_path = os.path.join(work, "sidecar.sock")
        start = time.perf_counter()
        process = subprocess.Popen([launcher, "worker", "serve", "--dev", "lo", "--ip", "127.0.0.1", "--socket",
                                    socket_path, "--accept-timeout", "5"], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
        line = process.stdout.readline()
        listening = time.perf_counter() - start
        cpu = cpu_seconds(process.pid)
        process.kill()
        _, err = process.communicate()
    if not line.startswith(b"listening"):
        print(json.dumps({"error": f"no listening line: {line!r} {err[-500:]!r}"}))
        return 1
    print(json.dumps({"serve_listening_s": round(listening, 3), "serve_cpu_s": round(cpu, 2)}))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "daemon":
        sys.exit(daemon(*sys.argv[2:]))
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        sys.exit(serve(sys.argv[2]))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
