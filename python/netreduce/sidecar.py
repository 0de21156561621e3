"""The ``sidecar`` transport: the Java software RC endpoint (``netreduce worker serve``) beside the trainer.

For hosts without an RDMA NIC. The trainer starts one sidecar per process, gives it a shared memory file and
talks to it over an owner-only Unix socket, one JSON line per request: the socket is the doorbell, and the sidecar
sleeps in poll(2) between calls, so it leaves the trainer's cores alone.

The shared memory is the sidecar's registered memory itself, in *message layout* (:attr:`SidecarTransport.layout`,
from the sidecar's answer to ``open``): an input area and an output area of ``messages x messageBytes`` bytes each,
message i at ``i x messageBytes`` with its tensor bytes behind 8 bytes where the sidecar writes the INA header. The
trainer puts a bucket into the input area's data parts, the sidecar sends every message straight from there, and
the appliance's sums land in the output area's data parts, where the trainer reads them: no copy in the sidecar.
"""
import json
import logging
import mmap
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from typing import Optional

from .errors import SetupError, TransportError

log = logging.getLogger("netreduce")


def _default_command() -> list:
    explicit = os.environ.get("NETREDUCE_COMMAND")
    if explicit:
        return explicit.split()
    found = shutil.which("netreduce")
    if found is None:
        raise SetupError("the sidecar transport needs the `netreduce` command (set NETREDUCE_COMMAND or "
                         "pass sidecar_command=[...])")
    return [found]


class SidecarTransport:
    """One ``netreduce worker serve`` process and the shared memory it works in."""

    name = "sidecar"

    def __init__(self, device: str, shm_bytes: int, pmtu: int, ip: Optional[str] = None,
                 command: Optional[list] = None, rto_us: int = 400_000, start_timeout: float = 60.0,
                 endpoint_nice: Optional[int] = None):
        self.layout: Optional[dict] = None  # set by open(): messages, messageBytes, input, output
        self._start(device, shm_bytes, ["--pmtu", str(pmtu), "--rto-us", str(rto_us)], ip=ip, command=command,
                    start_timeout=start_timeout, endpoint_nice=endpoint_nice)

    def _start(self, device: str, shm_bytes: int, options: list, *, ip: Optional[str], command: Optional[list],
               start_timeout: float, endpoint_nice: Optional[int]) -> None:
        """Create the shared memory, start ``netreduce worker serve`` with ``options`` (the protocol's) and connect
        to its socket."""
        self.shm_bytes = shm_bytes
        self._dir = tempfile.mkdtemp(prefix="netreduce-")  # 0700: only this user reaches the socket and memory
        self._socket_path = os.path.join(self._dir, "sidecar.sock")
        shm_dir = "/dev/shm" if os.path.isdir("/dev/shm") else self._dir
        fd, self._shm_path = tempfile.mkstemp(prefix="netreduce-", dir=shm_dir)
        try:
            os.ftruncate(fd, shm_bytes)
            self.memory = mmap.mmap(fd, shm_bytes)
        finally:
            os.close(fd)
        argv = list(command or _default_command()) + [
            "worker", "serve", "--dev", device, "--socket", self._socket_path, *options,
            "--accept-timeout", str(int(start_timeout))]
        if ip:
            argv += ["--ip", ip]
        if endpoint_nice is not None:
            argv += ["--endpoint-nice", str(endpoint_nice)]
        self._log = open(os.path.join(self._dir, "sidecar.log"), "w+b")
        try:
            self._process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._log, stdin=subprocess.DEVNULL)
        except OSError as error:
            self._cleanup_files()
            raise SetupError(f"cannot start the sidecar ({' '.join(argv)}): {error}") from error
        self._wait_listening(start_timeout)
        # What the sidecar warned about while starting (an endpoint thread that could not take its nice value, and
        # so will be slow while the trainer keeps the cores busy) goes to the trainer's log, not only to a file.
        for line in self.log_tail().splitlines():
            if "warning:" in line:
                log.warning("sidecar: %s", line.strip())
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(self._socket_path)
        self._reader = self._sock.makefile("rb")
        self._lock = threading.Lock()
        # Connected: nobody else may connect, and nothing should outlive a trainer that is killed. The log stays
        # readable through its open file.
        self._unlink(self._socket_path)
        self._unlink(os.path.join(self._dir, "sidecar.log"))
        shutil.rmtree(self._dir, ignore_errors=True)

    def _wait_listening(self, timeout: float) -> None:
        result = {}

        def read_first_line():
            result["line"] = self._process.stdout.readline()

        reader = threading.Thread(target=read_first_line, daemon=True)
        reader.start()
        reader.join(timeout)
        line = result.get("line", b"")
        if not line.startswith(b"listening"):
            self._process.kill()
            self._process.wait()
            detail = self.log_tail()
            self._cleanup_files()
            raise SetupError(f"the sidecar did not start within {timeout:.0f} s: {detail or 'no output'}")

    def log_tail(self, limit: int = 2000) -> str:
        try:
            self._log.flush()
            self._log.seek(0)
            return self._log.read().decode("utf-8", "replace")[-limit:].strip()
        except (OSError, ValueError):
            return ""

    def _call(self, request: dict) -> dict:
        with self._lock:
            try:
                self._sock.sendall((json.dumps(request) + "\n").encode("utf-8"))
                line = self._reader.readline()
            except OSError as error:
                raise TransportError(f"sidecar connection failed: {error}; sidecar log: {self.log_tail()}") from error
        if not line:
            code = self._process.poll()
            raise TransportError(f"the sidecar exited (status {code}) during {request.get('op')}: {self.log_tail()}")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise TransportError(f"sidecar {request.get('op')}: {reply.get('error')}")
        return reply

    def open(self, *, rank: int, world: int, ring: dict) -> dict:
        request = {"op": "open", "rank": rank, "world": world, "shm": self._shm_path, "shmBytes": self.shm_bytes}
        request.update(ring)
        try:
            reply = self._call(request)
            self.layout = {key: int(reply[key]) for key in ("messages", "messageBytes", "input", "output")}
            return reply
        except TransportError as error:
            raise SetupError(str(error)) from error
        finally:
            # Both sides have it mapped (or the open failed): the name is no longer needed, and a trainer killed
            # later leaves no 64 MiB file in /dev/shm behind.
            self._unlink(self._shm_path)

    def connect(self, successor: str, predecessor: str) -> None:
        try:
            self._call({"op": "connect", "successor": successor, "predecessor": predecessor})
        except TransportError as error:
            raise SetupError(str(error)) from error

    def allreduce(self, elements: int) -> int:
        """Sum the first ``elements`` values of the input area's messages across the ring into the output area's
        messages (see :attr:`layout`); microseconds taken."""
        return self._call({"op": "allreduce", "elements": elements})["us"]

    def stats(self) -> dict:
        return self._call({"op": "stats"})

    def close(self) -> None:
        try:
            if self._process.poll() is None:
                try:
                    self._call({"op": "close"})
                except (TransportError, ValueError):
                    pass
            self._sock.close()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        finally:
            try:
                self.memory.close()
            except (BufferError, ValueError):
                pass  # a tensor view still exists; the mapping goes with the process
            self._cleanup_files()

    @staticmethod
    def _unlink(path: str) -> None:
        try:
            os.unlink(path)
        except OSError:
            pass

    def _cleanup_files(self) -> None:
        for path in (self._shm_path, self._socket_path):
            self._unlink(path)
        try:
            self._log.close()
        except (AttributeError, OSError):
            pass
        shutil.rmtree(self._dir, ignore_errors=True)
