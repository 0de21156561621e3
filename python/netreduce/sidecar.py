"""The ``sidecar`` transport: the Java software RC endpoint (``netreduce worker serve``) beside the trainer.

For hosts without an RDMA NIC. The trainer starts one sidecar per process, gives it a shared memory file and
talks to it over an owner-only Unix socket, one JSON line per control request (``open``, ``connect``, ``stats``,
``close``, and every error). The sidecar sleeps in poll(2) between calls, so it leaves the trainer's cores alone.

Calls go through the *call doorbell* (``doorbell=True``, the default): a page behind the areas in the same shared
file, where the trainer posts a call's element count and sequence number in one 8-byte store and rings an eventfd
the sidecar polls beside its port (the trainer made it and passed it down at start), and where the sidecar answers
with a status, its own time and the sequence number, then rings the trainer's answer eventfd. No JSON, and the
request wakes the sidecar's endpoint thread directly. The trainer spins briefly on the answer word before it sleeps
in poll(2) on the answer eventfd and the socket: a failed call's error comes as a JSON line on the socket, and a
sidecar that dies closes it, so a waiting caller gets an error at once. The JSON ``allreduce`` request stays, for a
sidecar that has no doorbell, and when :attr:`SidecarTransport.use_doorbell` is set False.

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
import platform
import select
import shutil
import socket
import stat
import struct
import subprocess
import tempfile
import threading
import time
from typing import Optional

from .errors import SetupError, TransportError

log = logging.getLogger("netreduce")

# The call page (docs/python.md; worker CallPage.java): native byte order.
_REQUEST = struct.Struct("=Q")        # at 0: (~sequence << 32) | sequence, after the elements (struct writes bytes
                                      # one at a time: the sidecar takes the word once its halves agree)
_ELEMENTS = struct.Struct("=Q")       # at 24: the call's elements
_ANSWER = struct.Struct("=IIQ")       # at 8: answered sequence, status (0 ok, 1 failed), the sidecar's microseconds
_ANSWER_OFFSET = 8
_RELEASED = struct.Struct("=I")       # at 32: the last call whose input area the sidecar will not read again
_RELEASED_OFFSET = 32
_PAGE_BYTES = mmap.ALLOCATIONGRANULARITY
# The page relies on x86-64's ordering (TSO): the sidecar sees the elements before the request word written after
# them, and this side, spinning, the answer's status before its sequence (the sidecar's release store). Elsewhere
# calls go as JSON requests.
_SPIN_SAFE = platform.machine().lower() in ("x86_64", "amd64")
DEFAULT_DOORBELL_SPIN_US = 50


def _default_command() -> list:
    explicit = os.environ.get("NETREDUCE_COMMAND")
    if explicit:
        return explicit.split()
    found = shutil.which("netreduce")
    if found is None:
        raise SetupError("the sidecar transport needs the `netreduce` command (set NETREDUCE_COMMAND or "
                         "pass sidecar_command=[...])")
    return [found]


#: Where the shipped agent unit (systemd/netreduce-agent@.service, instance IFACE) keeps its socket.
HOST_AGENT_SOCKET = "/run/netreduce-agent-{device}/agent.sock"

#: What ``agent=`` or ``NETREDUCE_AGENT`` say to start a sidecar of the trainer's own even where the host runs an agent.
NO_AGENT = ("off", "none")


def host_agent(device: str) -> Optional[str]:
    """The socket of the agent the shipped unit runs for ``device`` on this host, when it is there and this process
    may reach it (the unit's runtime directory is its user's only); None otherwise. A session hands the agent the
    trainer's gradients, so a socket found without being named must be this user's or root's (systemd makes the
    unit's directory in /run, where only root creates anything, for the unit's user): one of another user is not
    taken."""
    path = HOST_AGENT_SOCKET.format(device=device)
    try:
        found = os.stat(path)
    except OSError:
        return None
    return path if stat.S_ISSOCK(found.st_mode) and found.st_uid in (0, os.getuid()) else None


def sidecar_transport(device: str, shm_bytes: int, pmtu: int, agent=None, **options) -> "SidecarTransport":
    """A :class:`SidecarTransport` as ``Session`` makes one. ``agent``: a socket path to take a session of that agent
    (an error if it gives none); False, "off" or "none" for a sidecar of this trainer's own; None for the
    ``NETREDUCE_AGENT`` environment variable (a path, or "off"), else the agent the shipped unit runs for ``device``
    (:func:`host_agent`) if there is one, else a sidecar of our own. An agent found that way that gives no session
    (stopped, refusing) is logged as a warning and the trainer starts its own sidecar: the training goes on. Where no
    agent runs, an info line says so once per transport: a sidecar of the trainer's own compiles the packet path in its
    first calls (docs/python.md, "The sidecar agent")."""
    if agent is None:
        agent = os.environ.get("NETREDUCE_AGENT") or None
    if agent is False or (isinstance(agent, str) and agent.lower() in NO_AGENT):
        return SidecarTransport(device, shm_bytes, pmtu, **options)
    if agent is not None:
        return SidecarTransport(device, shm_bytes, pmtu, agent=agent, **options)
    found = host_agent(device)
    if found is not None:
        try:
            return SidecarTransport(device, shm_bytes, pmtu, agent=found, **options)
        except SetupError as error:
            log.warning("netreduce: this host's sidecar agent at %s gave no session (%s); starting a sidecar of "
                        "this trainer's own", found, error)
    else:
        # Not a warning: a trainer may run without the agent by choice. But its own sidecar compiles the packet path
        # in the first calls (a W = 8, 64 MiB first call 2.1-2.3x the steady one on the test bed, 1.3-1.4x through
        # the agent: docs/performance.md), which a user should not have to find out from a profile.
        log.info("netreduce: no sidecar agent for %s (%s); starting a sidecar of this trainer's own, whose first "
                 "calls compile its packet path (docs/python.md, \"The sidecar agent\")", device,
                 HOST_AGENT_SOCKET.format(device=device))
    return SidecarTransport(device, shm_bytes, pmtu, **options)


def default_first_qpn(pid: Optional[int] = None) -> int:
    """The first QP number of this process's sidecar: 0x11 plus 256 per (pid mod 65535), in the 24-bit QP space
    (at most 0xFFFE11), so that the sidecars of the processes on one host give out different numbers."""
    pid = os.getpid() if pid is None else pid
    return 0x11 + (pid % 0xFFFF) * 0x100


class _AgentSession:
    """Stands for the sidecar's process where the sidecar is a session of the host's agent: the session lives as
    long as its control socket, which the transport watches; there is no process of ours to wait for or kill."""

    def __init__(self, agent: str, session):
        self.description = f"session {session} of the agent at {agent}"

    def poll(self):
        return None

    def wait(self, timeout=None):
        return f"unknown: {self.description} ended"

    def kill(self) -> None:
        pass


class SidecarTransport:
    """One ``netreduce worker serve`` process and the shared memory it works in."""

    name = "sidecar"

    @property
    def agent_session(self) -> Optional[str]:
        """"session K of the agent at PATH" where this sidecar is a session of a host's agent; None for a sidecar
        process of our own."""
        process = getattr(self, "_process", None)
        return process.description if isinstance(process, _AgentSession) else None

    def __init__(self, device: str, shm_bytes: int, pmtu: int, ip: Optional[str] = None,
                 command: Optional[list] = None, rto_us: int = 400_000, start_timeout: float = 60.0,
                 endpoint_nice: Optional[int] = None, doorbell: bool = True,
                 doorbell_spin_us: int = DEFAULT_DOORBELL_SPIN_US, first_qpn: Optional[int] = None,
                 agent: Optional[str] = None):
        self.layout: Optional[dict] = None  # set by open(): messages, messageBytes, input, output
        # Every sidecar on a host shares its interface and sees every frame, where one RDMA NIC's QP numbers are
        # distinct: each takes a range of 256 of its own, keyed by this process (two trainers' ranks on one host,
        # or two jobs, would otherwise both own QP 0x11 and take each other's packets).
        self.first_qpn = first_qpn if first_qpn is not None else default_first_qpn()
        self._start(device, shm_bytes, ["--pmtu", str(pmtu), "--rto-us", str(rto_us),
                                        "--first-qpn", str(self.first_qpn)], ip=ip, command=command,
                    start_timeout=start_timeout, endpoint_nice=endpoint_nice, doorbell=doorbell,
                    doorbell_spin_us=doorbell_spin_us, agent=agent,
                    session={"pmtu": pmtu, "rtoUs": rto_us, "firstQpn": self.first_qpn})

    def _start(self, device: str, shm_bytes: int, options: list, *, ip: Optional[str], command: Optional[list],
               start_timeout: float, endpoint_nice: Optional[int], doorbell: bool = False,
               doorbell_spin_us: int = DEFAULT_DOORBELL_SPIN_US, agent: Optional[str] = None,
               session: Optional[dict] = None) -> None:
        """Create the shared memory, start ``netreduce worker serve`` with ``options`` (the protocol's) and connect
        to its socket. With ``doorbell``, also the call page behind ``shm_bytes`` and the two eventfds, passed down
        to the sidecar (used once its ``open`` reply says so). With ``agent``, ask that host agent for a session
        with the settings ``session`` instead of starting a process (:meth:`_request_session`)."""
        self.shm_bytes = shm_bytes
        # Calls go by the doorbell once open() found the sidecar takes them; set False to send them as JSON lines.
        self.use_doorbell = False
        doorbell = doorbell and _SPIN_SAFE
        self.doorbell_spin_s = max(0, doorbell_spin_us) / 1e6
        self._page = None
        self._page_offset = None
        self._bells = None
        self._sequence = 0
        self._release_apart = False
        self._call_limit = None
        self._dir = tempfile.mkdtemp(prefix="netreduce-")  # 0700: only this user reaches the socket and memory
        self._socket_path = os.path.join(self._dir, "sidecar.sock")
        shm_dir = "/dev/shm" if os.path.isdir("/dev/shm") else self._dir
        fd, self._shm_path = tempfile.mkstemp(prefix="netreduce-", dir=shm_dir)
        try:
            if doorbell:
                # The call page: a page of its own behind the areas (the mapping the tensors use stays shm_bytes).
                self._page_offset = -(-shm_bytes // _PAGE_BYTES) * _PAGE_BYTES
                os.ftruncate(fd, self._page_offset + _PAGE_BYTES)
                self._page = mmap.mmap(fd, _PAGE_BYTES, offset=self._page_offset)
            else:
                os.ftruncate(fd, shm_bytes)
            self.memory = mmap.mmap(fd, shm_bytes)
        finally:
            os.close(fd)
        if doorbell:
            # Non-blocking: the sidecar drains its bell without blocking, and so does this side after poll(2).
            self._bells = (os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC),
                           os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC))
        self._log = open(os.path.join(self._dir, "sidecar.log"), "w+b")
        if agent:
            # the host's agent: no process of ours, so no `netreduce` command needed here
            self._request_session(agent, session or {}, start_timeout, ip=ip, endpoint_nice=endpoint_nice)
        else:
            try:
                argv = list(command or _default_command()) + [
                    "worker", "serve", "--dev", device, "--socket", self._socket_path, *options,
                    "--accept-timeout", str(int(start_timeout))]
            except SetupError:
                self._cleanup_files()
                raise
            if ip:
                argv += ["--ip", ip]
            if endpoint_nice is not None:
                argv += ["--endpoint-nice", str(endpoint_nice)]
            if self._bells:
                argv += ["--doorbell-fd", str(self._bells[0]), "--answer-fd", str(self._bells[1])]
            try:
                self._process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._log,
                                                 stdin=subprocess.DEVNULL, pass_fds=self._bells or ())
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

    def _request_session(self, agent: str, settings: dict, timeout: float, *, ip: Optional[str],
                         endpoint_nice: Optional[int]) -> None:
        """A session of this host's sidecar agent (``netreduce worker agent --socket AGENT``) in place of a sidecar
        process of our own: one JSON line to the agent with the call page's two eventfds attached (SCM_RIGHTS, as a
        sidecar we start inherits them); the agent opens the session's control socket at our socket path and says
        so, and from then on the session is talked to as a sidecar is."""
        request = {"op": "session", "socket": self._socket_path, "acceptTimeout": max(1, int(timeout)), **settings}
        if ip or endpoint_nice is not None:
            log.info("netreduce: with a sidecar agent, ip= and endpoint_nice= are the agent's (its --ip and "
                     "--endpoint-nice); the session's are not changed")
        self._log.write(f"this sidecar is a session of the agent at {agent}; its messages are in the agent's "
                        f"log\n".encode("utf-8"))
        line = (json.dumps(request) + "\n").encode("utf-8")
        door = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        door.settimeout(timeout)
        try:
            door.connect(agent)
            if self._bells:
                socket.send_fds(door, [line], list(self._bells))
            else:
                door.sendall(line)
            reply = door.makefile("rb").readline()
        except OSError as error:
            self._cleanup_files()
            raise SetupError(f"cannot start a session of the sidecar agent at {agent}: {error}") from error
        finally:
            door.close()
        try:
            answer = json.loads(reply)
        except ValueError:
            answer = {"ok": False, "error": f"no answer ({reply[:200]!r})"}
        if not answer.get("ok"):
            self._cleanup_files()
            raise SetupError(f"the sidecar agent at {agent} refused a session: {answer.get('error')}")
        self._process = _AgentSession(agent, answer.get("session"))

    def _wait_listening(self, timeout: float) -> None:
        result = {}

        def read_first_line():
            result["line"] = self._process.stdout.readline()

        reader = threading.Thread(target=read_first_line, daemon=True)
        reader.start()
        reader.join(timeout)
        line = result.get("line", b"")
        if not line.startswith(b"listening"):
            # Ended before listening (a bad interface, no CAP_NET_RAW: its one line says which), or still silent.
            status = self._process.poll()
            if status is None and "line" in result and not line:  # its output closed: it is ending
                try:
                    status = self._process.wait(5)
                except subprocess.TimeoutExpired:
                    pass
            self._process.kill()
            self._process.wait()
            detail = self.log_tail()
            self._cleanup_files()
            what = (f"the sidecar exited (status {status}) before it listened" if status is not None else
                    f"the sidecar did not start within {timeout:.0f} s")
            raise SetupError(f"{what}: {detail or 'no output'}")

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
            raise TransportError(f"the sidecar exited (status {self._exit_status()}) during {request.get('op')}: "
                                 f"{self.log_tail()}")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise TransportError(f"sidecar {request.get('op')}: {reply.get('error')}")
        return reply

    def open(self, *, rank: int, world: int, ring: dict) -> dict:
        request = {"op": "open", "rank": rank, "world": world, "shm": self._shm_path, "shmBytes": self.shm_bytes}
        request.update(ring)
        if self._page is not None:
            request["doorbell"] = self._page_offset
            request["inputRelease"] = True
        try:
            reply = self._call(request)
            self.layout = {key: int(reply[key]) for key in ("messages", "messageBytes", "input", "output")}
            self._opened_doorbell(reply, request)
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

    def _opened_doorbell(self, reply: dict, request: dict) -> None:
        """After an open: calls go by the doorbell if the sidecar mapped the call page."""
        if self._page is None:
            return
        if reply.get("doorbell") is True:
            self.use_doorbell = True
            # Answered at the sums; the input area released apart, when the call's own writes are acknowledged.
            self._release_apart = reply.get("inputRelease") is True
            # The sidecar fails a call after its timeout without progress; a caller waits that long plus a margin
            # for a sidecar that is alive but does not answer at all (the socket tells at once when it dies).
            self._call_limit = request.get("timeoutMs", 10_000) / 1000 + 30
        else:
            log.info("netreduce: this sidecar takes no call doorbell; calls go as JSON requests")

    def allreduce(self, elements: int) -> int:
        """Sum the first ``elements`` values of the input area's messages across the ring into the output area's
        messages (see :attr:`layout`); microseconds taken."""
        if self.use_doorbell:
            return self._ring_call(elements)
        return self._call({"op": "allreduce", "elements": elements})["us"]

    def wait_input(self) -> None:
        """Return once the input area may be refilled: at once, unless the last doorbell call was answered at its
        sums and its own writes (which a retransmission would read from the input area) are not acknowledged yet.
        The release usually comes while the caller reads the sums or computes; otherwise this spins for
        ``doorbell_spin_s``, then sleeps as :meth:`allreduce` does."""
        if self._release_apart:
            # Not under self._lock: the caller is the one thread that makes calls, and a control request from
            # another (stats) may go meanwhile; the sidecar answers it after the release.
            self._await_page(self._sequence, _RELEASED, _RELEASED_OFFSET, "the input area's release")

    def _ring_call(self, elements: int) -> int:
        """One call through the doorbell: post it on the call page, ring the sidecar, wait for the answer word
        (spinning for ``doorbell_spin_s`` first, then in poll(2) on the answer eventfd and the socket)."""
        page = self._page
        with self._lock:
            self._sequence = sequence = (self._sequence + 1) & 0xFFFFFFFF
            _ELEMENTS.pack_into(page, 24, elements)
            _REQUEST.pack_into(page, 0, ((~sequence & 0xFFFFFFFF) << 32) | sequence)
            try:
                os.eventfd_write(self._bells[0], 1)
            except OSError as error:
                raise TransportError(f"sidecar doorbell failed: {error}; sidecar log: {self.log_tail()}") from error
            _, status, micros = self._await_page(sequence, _ANSWER, _ANSWER_OFFSET, "the answer")
            if status != 0:
                line = self._reader.readline()
                if not line:
                    raise TransportError(f"the sidecar exited (status {self._exit_status()}) during allreduce: "
                                         f"{self.log_tail()}")
                raise TransportError(f"sidecar allreduce: {json.loads(line).get('error')}")
            return micros

    def _await_page(self, sequence: int, words: struct.Struct, offset: int, what: str):
        """The page's ``words`` at ``offset`` once they begin with ``sequence``: read at once, then spinning for
        ``doorbell_spin_s``, then sleeping in :meth:`_wait_page`."""
        page = self._page
        found = words.unpack_from(page, offset)
        if found[0] != sequence and self.doorbell_spin_s:
            until = time.perf_counter() + self.doorbell_spin_s
            while found[0] != sequence and time.perf_counter() < until:
                found = words.unpack_from(page, offset)
        if found[0] != sequence:
            found = self._wait_page(sequence, words, offset, what)
        return found

    def _wait_page(self, sequence: int, words: struct.Struct, offset: int, what: str):
        """Sleep until the page's ``words`` at ``offset`` begin with ``sequence`` (the answer, or the released word);
        raises when the sidecar closes its socket (it died) first, or neither answers nor dies within the call
        limit. The sidecar rings the answer eventfd after writing either."""
        page, answer_fd = self._page, self._bells[1]
        poller = select.poll()
        poller.register(answer_fd, select.POLLIN)
        poller.register(self._sock.fileno(), select.POLLIN)
        deadline = time.monotonic() + self._call_limit
        while True:
            answer = words.unpack_from(page, offset)
            if answer[0] == sequence:
                return answer
            events = poller.poll(1000)
            for fd, _ in events:
                if fd == answer_fd:
                    try:
                        os.eventfd_read(answer_fd)  # this answer's, or a stale one from a call answered while spinning
                    except BlockingIOError:
                        pass
                elif words.unpack_from(page, offset)[0] != sequence:
                    # The socket, before the answer: a failed call's error line comes just before its answer word;
                    # end of stream is the sidecar gone.
                    try:
                        alive = self._sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
                    except BlockingIOError:
                        alive = b"?"
                    except OSError as error:
                        raise TransportError(f"sidecar connection failed: {error}; sidecar log: "
                                             f"{self.log_tail()}") from error
                    if not alive:
                        raise TransportError(f"the sidecar exited (status {self._exit_status()}) during allreduce, "
                                             f"waiting for {what}: {self.log_tail()}")
                    time.sleep(0)  # the line is there: its answer word follows within microseconds
            if not events:
                code = self._process.poll()
                if code is not None:
                    raise TransportError(f"the sidecar exited (status {code}) during allreduce, waiting for {what}: "
                                         f"{self.log_tail()}")
                if time.monotonic() > deadline:
                    raise TransportError(f"the sidecar did not send {what} of an allreduce within "
                                         f"{self._call_limit:.0f} s (alive, status unknown): {self.log_tail()}")

    def _exit_status(self):
        """The sidecar's exit status once its socket has closed: it is on its way out, so wait a moment for it (an
        agent's session has no process of ours: its description says so)."""
        code = self._process.poll()
        if code is None:
            try:
                code = self._process.wait(timeout=1)
            except subprocess.TimeoutExpired:
                code = "unknown"
        return code

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
        self.use_doorbell = False
        if self._page is not None:
            self._page.close()
        for fd in self._bells or ():
            try:
                os.close(fd)
            except OSError:
                pass
        self._bells = None
        for path in (self._shm_path, self._socket_path):
            self._unlink(path)
        try:
            self._log.close()
        except (AttributeError, OSError):
            pass
        shutil.rmtree(self._dir, ignore_errors=True)
