"""The sidecar transport's start-up, with a stand-in for ``netreduce worker serve`` (no Java, no root)."""
import logging
import sys
import textwrap

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
