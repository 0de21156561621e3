"""The switchml transport without the bed: its options, what the session refuses with it, and its requests to a
stand-in for ``netreduce worker serve --protocol switchml`` (no Java, no root, no process group). The bed test
(test_bed.py, test_should_train_and_sum_through_switchml) runs it through the daemon."""
import importlib.util
import json
import os
import sys
import textwrap

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from netreduce.errors import SetupError, TransportError  # noqa: E402
from netreduce.switchml import SwitchMlTransport, check_options  # noqa: E402

CONTROLLER = "10.77.0.253:50099"

# Records its arguments and every request in $FAKE_RECORD, answers open as the real sidecar does (or refuses it when
# $FAKE_REFUSE is set), and "sums" a call by doubling its values in place: what a job of two workers holding the
# same tensor returns.
FAKE_SERVE = textwrap.dedent("""
    import json, mmap, os, socket, sys
    argv = sys.argv[1:]
    record = open(os.environ["FAKE_RECORD"], "a")
    record.write(json.dumps({"argv": argv}) + "\\n")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(argv[argv.index("--socket") + 1])
    server.listen(1)
    print("listening", flush=True)
    connection, _ = server.accept()
    memory, kind = None, "f"
    for line in connection.makefile("rb"):
        request = json.loads(line)
        record.write(json.dumps(request) + "\\n")
        record.flush()
        reply = {"ok": True}
        if request["op"] == "open" and os.environ.get("FAKE_REFUSE"):
            reply = {"ok": False, "error": os.environ["FAKE_REFUSE"]}
        elif request["op"] == "open":
            fd = os.open(request["shm"], os.O_RDWR)
            memory = mmap.mmap(fd, request["shmBytes"])
            os.close(fd)
            kind = "i" if request["elementType"] == "int32" else "f"
            reply.update(ip="10.77.0.2", mac="02:77:00:00:00:02", switchIp="10.77.0.254",
                         switchMac="02:77:00:00:00:fe", udpPort=40000 + request["rank"],
                         elementType=request["elementType"],
                         elementsPerPacket=int(argv[argv.index("--elements") + 1]),
                         elements=request["shmBytes"] // 4)
        elif request["op"] == "allreduce":
            values = memoryview(memory)[:4 * request["elements"]].cast(kind)
            for i in range(len(values)):
                values[i] = 2 * values[i]
            values.release()
            reply["us"] = 7
        connection.sendall((json.dumps(reply) + "\\n").encode())
        if request["op"] == "close":
            break
""")


@pytest.mark.parametrize("element_type", ["fp16", "bf16"])
def test_should_refuse_half_precision_types(element_type):
    with pytest.raises(SetupError, match=f"not '{element_type}'"):
        check_options(element_type=element_type, controller=CONTROLLER, elements=256, outstanding=128)


@pytest.mark.parametrize("controller, match", [
    (None, "needs controller='HOST:PORT'"), ("", "needs controller"), ("10.77.0.253", "HOST:PORT, not"),
    (":50099", "HOST:PORT, not"), ("10.77.0.253:0", "HOST:PORT, not"), ("10.77.0.253:65536", "HOST:PORT, not"),
    ("10.77.0.253:port", "HOST:PORT, not")])
def test_should_refuse_a_controller_that_is_not_host_and_port(controller, match):
    with pytest.raises(SetupError, match=match):
        check_options(element_type="fp32", controller=controller, elements=256, outstanding=128)


@pytest.mark.parametrize("elements", [0, 16, 100, 257, 4096, "256"])
def test_should_refuse_elements_per_packet_without_a_packet_size_code(elements):
    with pytest.raises(SetupError, match="switchml_elements must be a power of two from 32 to 2048"):
        check_options(element_type="int32", controller=CONTROLLER, elements=elements, outstanding=128)


@pytest.mark.parametrize("outstanding", [0, 16385])
def test_should_refuse_outstanding_packets_out_of_range(outstanding):
    with pytest.raises(SetupError, match="switchml_outstanding must be 1..16384"):
        check_options(element_type="int32", controller=CONTROLLER, elements=256, outstanding=outstanding)


def test_should_accept_what_switchml_serves():
    for element_type in ("fp32", "int32"):
        for elements in (32, 256, 1024, 2048):
            check_options(element_type=element_type, controller=CONTROLLER, elements=elements, outstanding=128)
    check_options(element_type="fp32", controller="switch.example:50099", elements=64, outstanding=1)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="sessions need PyTorch (Debian: python3-torch)")
class TestSession:
    """What Session refuses with transport="switchml" before it starts anything (no process group needed)."""

    @staticmethod
    def session(**settings):
        import netreduce  # noqa: PLC0415

        return netreduce.Session(**{"transport": "switchml", "device": "eth0", "controller": CONTROLLER,
                                    **settings})

    @pytest.mark.parametrize("element_type", ["fp16", "bf16"])
    def test_should_refuse_half_precision(self, element_type):
        with pytest.raises(SetupError, match="fp32 .* and int32 .*, not"):
            self.session(element_type=element_type)

    def test_should_refuse_install_with_a_clear_reason(self):
        with pytest.raises(SetupError, match="install=True installs a NetReduce ring; the switchml transport has none"):
            self.session(install=True, appliance="unix:/run/netreduce/api.sock")

    def test_should_need_a_controller_and_a_device(self):
        with pytest.raises(SetupError, match="needs controller="):
            self.session(controller=None)
        with pytest.raises(SetupError, match="needs device="):
            self.session(device=None)

    def test_should_refuse_a_controller_with_another_transport(self):
        import netreduce  # noqa: PLC0415

        with pytest.raises(SetupError, match="controller= is the switchml transport's"):
            netreduce.Session(transport="sidecar", device="eth0", controller=CONTROLLER)

    def test_should_refuse_ranks_that_would_cut_tensors_differently(self):
        from netreduce.session import Session  # noqa: PLC0415

        same = {"elements": 262144, "elementsPerPacket": 256, "elementType": "fp32", "switchIp": "10.77.0.254"}
        Session._check_same_session(None, [same, dict(same)])
        for key, other in (("elements", 65536), ("elementsPerPacket", 1024), ("elementType", "int32")):
            with pytest.raises(SetupError, match=f"rank 1: .*{key} {other}"):
                Session._check_same_session(None, [same, {**same, key: other}])

    def test_should_check_its_own_options_first(self):
        with pytest.raises(SetupError, match="switchml_elements"):
            self.session(switchml_elements=3000)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    script = tmp_path / "fake_serve.py"
    script.write_text(FAKE_SERVE)
    record = tmp_path / "record.jsonl"
    monkeypatch.setenv("FAKE_RECORD", str(record))

    def recorded():
        with open(record, encoding="utf-8") as f:
            return [json.loads(line) for line in f]

    return [sys.executable, str(script)], recorded


def test_should_start_the_sidecar_in_switchml_mode_and_sum_in_place_without_connecting(fake):
    command, recorded = fake
    transport = SwitchMlTransport("eth0", 4096, CONTROLLER, elements=64, outstanding=32, element_type="int32",
                                  command=command, start_timeout=10)
    try:
        assert transport.layout is None and transport.needs_ring is False
        info = transport.open(rank=1, world=2, ring={"elementType": "int32", "timeoutMs": 5000, "window": 16})
        assert info["elements"] == 1024 and info["elementsPerPacket"] == 64 and info["ip"] == "10.77.0.2"
        assert not os.path.exists(transport._shm_path), "the shared memory's name outlives the open"
        transport.connect()
        values = memoryview(transport.memory).cast("i")
        for i in range(12):
            values[i] = i - 5
        assert transport.allreduce(0, 10) == 7
        assert list(values[:12]) == [2 * (i - 5) for i in range(10)] + [5, 6]
        values.release()
        with pytest.raises(TransportError, match="not offset 8"):
            transport.allreduce(8, 1)
    finally:
        transport.close()
    lines = recorded()
    argv = lines[0]["argv"]
    assert argv[:2] == ["worker", "serve"]
    joined = " ".join(argv)
    assert f"--protocol switchml --controller {CONTROLLER} --elements 64 --outstanding 32" in joined
    assert "--pmtu" not in argv and "--rto-us" not in argv
    requests = lines[1:]
    assert [r["op"] for r in requests] == ["open", "allreduce", "close"]
    assert {k: requests[0][k] for k in ("rank", "world", "elementType", "timeoutMs", "shmBytes")} == \
        {"rank": 1, "world": 2, "elementType": "int32", "timeoutMs": 5000, "shmBytes": 4096}
    assert "window" not in requests[0], "ring settings are not the switchml sidecar's"
    assert requests[1] == {"op": "allreduce", "elements": 10}


def test_should_raise_setup_error_with_the_sidecars_reason_when_open_is_refused(fake, monkeypatch):
    command, _ = fake
    monkeypatch.setenv("FAKE_REFUSE", "the SwitchML controller at 10.77.0.253:50099 refused the session: no")
    transport = SwitchMlTransport("eth0", 4096, CONTROLLER, command=command, start_timeout=10)
    try:
        with pytest.raises(SetupError, match="refused the session: no"):
            transport.open(rank=0, world=2, ring={"elementType": "fp32", "timeoutMs": 5000})
        assert not os.path.exists(transport._shm_path)
    finally:
        transport.close()
