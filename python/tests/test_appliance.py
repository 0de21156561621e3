"""The session-start check of a ring's parameters, against a real HTTP server answering as the control API does."""
import http.server
import json
import os
import sys
import threading

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from netreduce_verbs import appliance, ina  # noqa: E402

RING = {"ringId": 3, "elementType": "fp32", "window": 8, "msgLen": 16, "payloadSize": 4096, "pmtu": 4096,
        "inetTag": "NRED", "resultTag": "NRES", "worldSize": 2,
        "members": [{"rank": 0, "ip": "10.77.0.1"}, {"rank": 1, "ip": "10.77.0.2"}]}


@pytest.fixture()
def api():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            if self.path == "/v1/rings/3/parameters":
                body, status = json.dumps(RING).encode(), 200
            else:
                body, status = json.dumps({"error": "no ring"}).encode(), 404
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def settings(**changes):
    base = dict(ring_id=3, world=2, rank=1, window=8, msg_len=16, payload=4096, dtype="fp32", ip="10.77.0.2")
    base.update(changes)
    return base


def test_should_accept_a_client_that_matches_the_ring(api):
    appliance.check_ring_parameters(appliance.fetch_ring_parameters(api, 3), **settings())


def test_should_refuse_a_client_whose_window_and_msg_len_differ_naming_both(api):
    with pytest.raises(appliance.RingMismatch) as refused:
        appliance.check_ring_parameters(appliance.fetch_ring_parameters(api, 3), **settings(window=4, msg_len=8))
    assert "window is 4 here but 8 on the appliance" in str(refused.value)
    assert "msgLen is 8 here but 16 on the appliance" in str(refused.value)


def test_should_refuse_a_client_with_another_tag_or_address(api):
    with pytest.raises(appliance.RingMismatch) as refused:
        appliance.check_ring_parameters(appliance.fetch_ring_parameters(api, 3),
                                        **settings(inet_tag="ABCD", ip="10.77.0.9"))
    assert "inetTag is 'ABCD' here but 'NRED'" in str(refused.value)
    assert "rank 1 is 10.77.0.2 on the appliance, but this host sends from 10.77.0.9" in str(refused.value)


def test_should_say_when_the_ring_is_not_installed(api):
    with pytest.raises(appliance.RingMismatch, match="ring 7 is not installed"):
        appliance.fetch_ring_parameters(api, 7)


def test_should_say_when_the_appliance_cannot_be_reached():
    with pytest.raises(appliance.ApplianceUnreachable, match="cannot read"):
        appliance.fetch_ring_parameters("http://127.0.0.1:9", 3, timeout=2)


def test_should_pack_the_rings_own_tag():
    assert ina.pack(1, 2, 3, 4, ina.tag_value("ABCD"))[:4] == b"ABCD"
    with pytest.raises(ValueError):
        ina.tag_value("ABC")
