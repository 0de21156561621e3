"""The sidecar transport's start-up, with a stand-in for ``netreduce worker serve`` (no Java, no root)."""
import logging
import sys
import textwrap
import threading
import time

import pytest

import json
import os
import socket

from netreduce.errors import SetupError, TransportError
from netreduce.sidecar import SidecarTransport

# Listens where it is told, says on stderr what the real sidecar says when the kernel refuses its endpoint thread's
# nice value, announces itself as the real one does, and answers the trainer's close.
FAKE_SERVE = textwrap.dedent("""
    import socket, sys
    path = sys.argv[sys.argv.index("--socket") + 1]
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    print("serve: warning: the endpoint thread keeps its nice value, so calls slow down when the host's cores are "
          "busy: setpriority(thread 1, nice -10): Permission denied", file=sys.stderr, flush=True)
    print("listening", flush=True)
    connection, _ = server.accept()
    reader = connection.makefile("rb")
    if reader.readline():
        connection.sendall(b'{"ok": true}\\n')
""")


def test_should_log_what_the_sidecar_warned_about_while_starting(tmp_path, caplog):
    fake = tmp_path / "fake_serve.py"
    fake.write_text(FAKE_SERVE)
    with caplog.at_level(logging.WARNING, logger="netreduce"):
        transport = SidecarTransport("eth0", 1 << 16, 4096, command=[sys.executable, str(fake)], start_timeout=10,
                                     endpoint_nice=-10)
        transport.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("keeps its nice value" in w and "Permission denied" in w for w in warnings), warnings


# The sidecar's side of the call doorbell (worker CallPage.java), as a stand-in: maps the call page the open names,
# answers every call posted there by summing nothing (it only answers), and behaves as its mode says:
# (FAKE_DOORBELL_MODE) "answer" (status 0, 4242 us), "fail" (the error line on the socket, then the failed status), "die" (exits while
# the caller waits). JSON allreduce lines are answered too, and counted in stats.
FAKE_DOORBELL_SERVE = textwrap.dedent("""
    import json, mmap, os, select, socket, struct, sys
    argv = sys.argv
    mode = os.environ["FAKE_DOORBELL_MODE"]
    path = argv[argv.index("--socket") + 1]
    bells = (int(argv[argv.index("--doorbell-fd") + 1]), int(argv[argv.index("--answer-fd") + 1])) \\
        if "--doorbell-fd" in argv else None
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    print("listening", flush=True)
    connection, _ = server.accept()
    reader = connection.makefile("rb")
    page = None
    json_calls = page_calls = 0
    last = 0

    def reply(obj):
        connection.sendall((json.dumps(obj) + "\\n").encode())

    def answer(sequence, status, us):
        page[16:24] = struct.pack("=Q", us)
        page[12:16] = struct.pack("=I", status)
        page[8:12] = struct.pack("=I", sequence)
        os.eventfd_write(bells[1], 1)

    while True:
        ready = [connection] if page is None else select.select([connection, bells[0]], [], [])[0]
        if page is not None and bells[0] in ready:
            try:
                os.eventfd_read(bells[0])
            except BlockingIOError:
                pass
            word = struct.unpack_from("=Q", page, 0)[0]
            if word & 0xFFFFFFFF != last and word >> 32 == ~word & 0xFFFFFFFF:
                last = word & 0xFFFFFFFF
                elements = struct.unpack_from("=Q", page, 24)[0]
                page_calls += 1
                if mode == "die":
                    os._exit(3)
                if mode == "fail":
                    reply({"ok": False, "error": f"no progress for 300 ms ({elements} elements)"})
                    answer(last, 1, 0)
                else:
                    if mode != "release":
                        page[32:36] = struct.pack("=I", last)  # answered with its input area released
                    answer(last, 0, 4242)
        if connection not in ready:
            continue
        line = reader.readline()
        if not line:
            break
        request = json.loads(line)
        op = request["op"]
        if op == "open":
            ok = {"ok": True, "messages": 1, "messageBytes": 65536, "input": 0, "output": 65536,
                  "send": "s", "receive": "r"}
            if "doorbell" in request and bells and mode != "nodoorbell":
                shm = os.open(request["shm"], os.O_RDWR)
                page = mmap.mmap(shm, 64, offset=request["doorbell"])
                ok["doorbell"] = True
                # "release": answered at the sums, the input area released on a "release" request, and gone on
                # a "die" request
                ok["inputRelease"] = mode == "release" and request.get("inputRelease") is True
            reply(ok)
        elif op == "allreduce":
            json_calls += 1
            reply({"ok": True, "us": 7})
        elif op == "stats":
            reply({"ok": True, "jsonCalls": json_calls, "pageCalls": page_calls})
        elif op == "release":
            page[32:36] = struct.pack("=I", last)
            os.eventfd_write(bells[1], 1)
            reply({"ok": True})
        elif op == "die":
            os._exit(5)
        elif op == "close":
            reply({"ok": True})
            break
""")

RING = {"ringId": 1, "elementType": "fp32", "window": 16, "msgLen": 16, "payloadSize": 4096, "timeoutMs": 300}


def _doorbell_transport(tmp_path, monkeypatch, mode, **options):
    fake = tmp_path / "fake_doorbell_serve.py"
    fake.write_text(FAKE_DOORBELL_SERVE)
    monkeypatch.setenv("FAKE_DOORBELL_MODE", mode)
    transport = SidecarTransport("eth0", 1 << 17, 4096, command=[sys.executable, str(fake)], start_timeout=10,
                                 **options)
    transport.open(rank=0, world=2, ring=RING)
    return transport


def test_should_answer_a_call_through_the_doorbell_without_a_json_line(tmp_path, monkeypatch):
    transport = _doorbell_transport(tmp_path, monkeypatch, "answer")
    try:
        assert transport.use_doorbell
        assert [transport.allreduce(100) for _ in range(3)] == [4242] * 3
        transport.doorbell_spin_s = 0  # straight to poll(2): the answer eventfd wakes the caller
        assert transport.allreduce(100) == 4242
        stats = transport.stats()
        assert (stats["pageCalls"], stats["jsonCalls"]) == (4, 0)
        transport.use_doorbell = False  # the JSON request stays, selectable
        assert transport.allreduce(100) == 7
        assert transport.stats()["jsonCalls"] == 1
    finally:
        transport.close()


def _waiting_for_input(transport):
    """wait_input() on a thread of its own: the thread, and where its outcome lands."""
    outcome = []

    def wait():
        try:
            transport.wait_input()
            outcome.append("released")
        except TransportError as error:
            outcome.append(error)

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread, outcome


def test_should_wait_for_the_input_areas_release_after_a_call_answered_at_its_sums(tmp_path, monkeypatch):
    transport = _doorbell_transport(tmp_path, monkeypatch, "release")
    try:
        transport.wait_input()  # no call yet: free at once
        assert transport.allreduce(100) == 4242  # answered with its input area still the sidecar's
        for spin in (50e-6, 0):  # spinning first, or straight to poll(2)
            transport.doorbell_spin_s = spin
            thread, outcome = _waiting_for_input(transport)
            thread.join(0.3)
            assert thread.is_alive() and not outcome
            assert transport._call({"op": "release"})["ok"]  # control goes on meanwhile
            thread.join(5)
            assert outcome == ["released"]
            transport.wait_input()  # and stays free until the next call
            assert transport.allreduce(100) == 4242
        # the sidecar dies before the release: the waiting caller is told, not left hanging
        thread, outcome = _waiting_for_input(transport)
        with pytest.raises(TransportError):
            transport._call({"op": "die"})
        thread.join(5)
        assert len(outcome) == 1 and isinstance(outcome[0], TransportError)
        assert "exited (status 5) during allreduce, waiting for the input area's release" in str(outcome[0])
    finally:
        transport.close()


def test_should_not_wait_for_a_release_from_a_sidecar_that_answers_when_its_input_area_is_free(tmp_path,
                                                                                           monkeypatch):
    transport = _doorbell_transport(tmp_path, monkeypatch, "answer")
    try:
        assert transport.allreduce(100) == 4242
        transport.doorbell_spin_s = 0
        transport.wait_input()
    finally:
        transport.close()


def test_should_send_calls_as_json_lines_to_a_sidecar_that_takes_no_doorbell(tmp_path, monkeypatch):
    transport = _doorbell_transport(tmp_path, monkeypatch, "nodoorbell")
    try:
        assert not transport.use_doorbell
        assert transport.allreduce(100) == 7
        assert transport.stats()["jsonCalls"] == 1
    finally:
        transport.close()


def test_should_send_calls_as_json_lines_with_the_doorbell_off(tmp_path, monkeypatch):
    transport = _doorbell_transport(tmp_path, monkeypatch, "answer", doorbell=False)
    try:
        assert not transport.use_doorbell
        assert transport.allreduce(100) == 7
    finally:
        transport.close()


def test_should_raise_the_sidecars_error_for_a_call_that_failed_through_the_doorbell(tmp_path, monkeypatch):
    transport = _doorbell_transport(tmp_path, monkeypatch, "fail")
    try:
        for _ in range(2):  # and the next call is answered on its own (the error line was taken with its call)
            with pytest.raises(TransportError, match=r"no progress for 300 ms \(100 elements\)"):
                transport.allreduce(100)
    finally:
        transport.close()


def test_should_raise_at_once_when_the_sidecar_dies_while_a_call_waits(tmp_path, monkeypatch):
    transport = _doorbell_transport(tmp_path, monkeypatch, "die")
    try:
        transport.doorbell_spin_s = 0
        started = time.monotonic()
        with pytest.raises(TransportError, match=r"the sidecar exited \(status 3\) during allreduce"):
            transport.allreduce(100)
        # The socket's end of stream wakes the caller: not the open's 300 ms, nor the 30 s margin after it.
        assert time.monotonic() - started < 5
    finally:
        transport.close()


def _built_launcher():
    import os  # noqa: PLC0415
    path = os.path.join(os.path.dirname(__file__), "..", "..", "aggregator-daemon", "target", "netreduce")
    return os.path.abspath(path) if os.path.isfile(path) else None


@pytest.mark.skipif(_built_launcher() is None or not hasattr(__import__("os"), "geteuid")
                    or __import__("os").geteuid() != 0,
                    reason="needs the built launcher (./mvnw package) and root (the sidecar's AF_PACKET port on lo)")
def test_should_answer_the_real_sidecars_calls_through_the_doorbell_and_raise_when_it_dies():
    import os  # noqa: PLC0415
    import signal  # noqa: PLC0415
    import threading  # noqa: PLC0415
    transport = SidecarTransport("lo", 1 << 18, 4096, command=[_built_launcher()], start_timeout=60)
    try:
        opened = transport.open(rank=0, world=2, ring=dict(RING, window=8, timeoutMs=30_000))
        assert transport.use_doorbell
        with pytest.raises(TransportError, match="allreduce before connect"):
            transport.allreduce(4)
        # The ring's successor is a queue pair nobody has: the call's messages go out on lo and nothing answers.
        successor = opened["receive"].split()
        successor[0] = "qpn=0xfffff0"
        transport.connect(" ".join(successor), opened["send"])
        with pytest.raises(TransportError, match="do not fit the input area"):
            transport.allreduce(40_000)
        killer = threading.Timer(0.5, os.kill, (transport._process.pid, signal.SIGKILL))
        killer.start()
        started = time.monotonic()
        with pytest.raises(TransportError, match=r"the sidecar exited \(status -9\) during allreduce"):
            transport.allreduce(1000)
        killer.join()
        assert time.monotonic() - started < 5  # the call's own timeout is 30 s
    finally:
        transport.close()


def test_should_give_the_sidecars_of_different_processes_on_one_host_different_qp_ranges():
    # Two trainers' sidecars on one host share the interface: each owns a range of 256 QP numbers of its own.
    from netreduce.sidecar import default_first_qpn

    ranges = {default_first_qpn(pid) for pid in range(1, 2000)}
    assert len(ranges) == 1999
    assert all(0x11 <= first and first + 0xFF <= 0xFFFFFF for first in ranges)
    assert default_first_qpn(0xFFFF) == 0x11  # pids 65535 apart share a range: the limit of this scheme


def _fake_agent(path, answer):
    """A stand-in for `netreduce worker agent`: takes one request with its descriptors, answers ``answer(request)``
    (a dict, or None to close without a word); what it got, for the test to look at."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    got = {}

    def serve():
        connection, _ = server.accept()
        with connection:
            data, fds, _, _ = socket.recv_fds(connection, 4096, 4)
            got["request"] = json.loads(data)
            got["fds"] = [os.readlink(f"/proc/self/fd/{fd}") for fd in fds]
            for fd in fds:
                os.close(fd)
            reply = answer(got["request"])
            if reply is not None:
                connection.sendall((json.dumps(reply) + "\n").encode())
        server.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return got, thread


def test_should_ask_the_agent_for_a_session_with_the_call_pages_eventfds(tmp_path):
    got, thread = _fake_agent(tmp_path / "agent.sock", lambda request: {"ok": False, "error": "runs 16 sessions"})
    with pytest.raises(SetupError, match="refused a session: runs 16 sessions"):
        SidecarTransport("eth0", 1 << 16, 4096, start_timeout=10, agent=str(tmp_path / "agent.sock"),
                         first_qpn=0x1234)
    thread.join(5)
    request = got["request"]
    assert request["op"] == "session" and request["pmtu"] == 4096 and request["firstQpn"] == 0x1234
    assert request["rtoUs"] == 400_000 and request["acceptTimeout"] == 10
    assert os.path.isabs(request["socket"])
    # the doorbell and the answer bell, handed over as a sidecar started by the trainer would inherit them
    assert got["fds"] == ["anon_inode:[eventfd]", "anon_inode:[eventfd]"]


def test_should_say_so_when_the_agent_closes_without_an_answer_or_is_not_there(tmp_path):
    got, thread = _fake_agent(tmp_path / "agent.sock", lambda request: None)
    with pytest.raises(SetupError, match="refused a session: no answer"):
        SidecarTransport("eth0", 1 << 16, 4096, start_timeout=10, agent=str(tmp_path / "agent.sock"))
    thread.join(5)
    with pytest.raises(SetupError, match="cannot start a session of the sidecar agent at .*missing.sock"):
        SidecarTransport("eth0", 1 << 16, 4096, start_timeout=10, agent=str(tmp_path / "missing.sock"))


def _host_agent_at(tmp_path, monkeypatch):
    """Point the shipped unit's socket path into tmp_path; no NETREDUCE_AGENT in the environment."""
    import netreduce.sidecar as sidecar

    monkeypatch.delenv("NETREDUCE_AGENT", raising=False)
    monkeypatch.setattr(sidecar, "HOST_AGENT_SOCKET", str(tmp_path / "agent-{device}.sock"))
    return tmp_path / "agent-eth0.sock"


def test_should_find_the_agent_the_shipped_unit_runs_for_the_device_only_where_its_socket_is(tmp_path, monkeypatch):
    from netreduce.sidecar import host_agent

    path = _host_agent_at(tmp_path, monkeypatch)
    assert host_agent("eth0") is None
    path.write_text("not a socket")
    assert host_agent("eth0") is None
    path.unlink()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    try:
        assert host_agent("eth0") == str(path)
        assert host_agent("eth1") is None
    finally:
        server.close()


def test_should_start_its_own_sidecar_with_a_warning_when_the_hosts_agent_gives_no_session(tmp_path, monkeypatch,
                                                                                          caplog):
    from netreduce.sidecar import sidecar_transport

    path = _host_agent_at(tmp_path, monkeypatch)
    got, thread = _fake_agent(path, lambda request: {"ok": False, "error": "runs 16 sessions"})
    fake = tmp_path / "fake_serve.py"
    fake.write_text(FAKE_SERVE)
    with caplog.at_level(logging.WARNING, logger="netreduce"):
        transport = sidecar_transport("eth0", 1 << 16, 4096, command=[sys.executable, str(fake)], start_timeout=10)
    try:
        thread.join(5)
        assert got["request"]["op"] == "session"  # the host's agent was asked first
        assert transport.agent_session is None and transport._process.pid > 0  # then a sidecar of our own
    finally:
        transport.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("gave no session" in w and "runs 16 sessions" in w for w in warnings), warnings


def test_should_say_so_when_no_agent_runs_and_it_starts_its_own_sidecar(tmp_path, monkeypatch, caplog):
    from netreduce.sidecar import sidecar_transport

    _host_agent_at(tmp_path, monkeypatch)
    fake = tmp_path / "fake_serve.py"
    fake.write_text(FAKE_SERVE)
    with caplog.at_level(logging.INFO, logger="netreduce"):
        transport = sidecar_transport("eth0", 1 << 16, 4096, command=[sys.executable, str(fake)], start_timeout=10)
    transport.close()
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any("no sidecar agent for eth0" in m and str(tmp_path / "agent-eth0.sock") in m and "first calls" in m
               for m in infos), infos
    # not a warning: running without the agent may be the user's choice (the fake sidecar's own stderr line is one)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "agent" in r.getMessage()]


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_should_not_ask_the_hosts_agent_when_told_off(tmp_path, monkeypatch, how):
    from netreduce.sidecar import sidecar_transport

    path = _host_agent_at(tmp_path, monkeypatch)
    got, thread = _fake_agent(path, lambda request: {"ok": False, "error": "should not be asked"})
    fake = tmp_path / "fake_serve.py"
    fake.write_text(FAKE_SERVE)
    agent = False
    if how == "environment":
        monkeypatch.setenv("NETREDUCE_AGENT", "off")
        agent = None
    transport = sidecar_transport("eth0", 1 << 16, 4096, agent=agent, command=[sys.executable, str(fake)],
                                  start_timeout=10)
    transport.close()
    assert "request" not in got


def test_should_fail_when_an_agent_named_gives_no_session(tmp_path, monkeypatch):
    from netreduce.sidecar import sidecar_transport

    _host_agent_at(tmp_path, monkeypatch)
    monkeypatch.setenv("NETREDUCE_AGENT", str(tmp_path / "named.sock"))
    got, thread = _fake_agent(tmp_path / "named.sock", lambda request: {"ok": False, "error": "runs 16 sessions"})
    with pytest.raises(SetupError, match="refused a session: runs 16 sessions"):
        sidecar_transport("eth0", 1 << 16, 4096, start_timeout=10)
    thread.join(5)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give the socket to another user")
def test_should_not_take_a_socket_of_another_user_for_the_hosts_agent(tmp_path, monkeypatch):
    from netreduce.sidecar import host_agent

    path = _host_agent_at(tmp_path, monkeypatch)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    try:
        assert host_agent("eth0") == str(path)
        os.chown(path, 65534, 65534)
        assert host_agent("eth0") is None
    finally:
        server.close()


def test_should_say_the_sidecar_exited_and_why_when_it_ends_before_listening(tmp_path):
    fake = tmp_path / "failing_serve.py"
    fake.write_text("import sys\n"
                    "print(\"serve: no such network interface 'eth9': No such device (errno 19)\", file=sys.stderr)\n"
                    "sys.exit(3)\n")
    started = time.monotonic()
    with pytest.raises(SetupError, match=r"the sidecar exited \(status 3\) before it listened: serve: no such "
                                         r"network interface 'eth9'"):
        SidecarTransport("eth9", 1 << 16, 4096, command=[sys.executable, str(fake)], start_timeout=30)
    assert time.monotonic() - started < 10  # not the start timeout
