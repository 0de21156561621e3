"""What a client checks with the appliance before it sends: the ring's parameters.

A client whose window, MsgLen, payload size, element type or InetTag differ from the ring's does not fail: it
stalls until its RC timeout, while the appliance drops its packets under counters the client never sees. So a
session reads the ring's parameters from the control API (GET /v1/rings/{id}/parameters) when it starts and
refuses to run on any mismatch, naming each one.
"""
import json
import urllib.error
import urllib.request

PARAMETERS_PATH = "/v1/rings/{ring_id}/parameters"


class RingMismatch(Exception):
    """The client's settings disagree with the ring the appliance aggregates."""


class ApplianceUnreachable(Exception):
    """The control API could not be asked."""


def fetch_ring_parameters(api: str, ring_id: int, timeout: float = 5.0) -> dict:
    """The ring's parameters as the appliance reports them. api: base URL, e.g. http://127.0.0.1:9740."""
    url = api.rstrip("/") + PARAMETERS_PATH.format(ring_id=ring_id)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as error:
        if error.code == 404:
            raise RingMismatch(f"ring {ring_id} is not installed on the appliance at {api}") from error
        raise ApplianceUnreachable(f"{url}: HTTP {error.code} {error.reason}") from error
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise ApplianceUnreachable(f"cannot read {url}: {error}") from error


def check_ring_parameters(parameters: dict, *, ring_id: int, world: int, rank: int, window: int, msg_len: int,
                          payload: int, dtype: str, inet_tag: str = "NRED", result_tag: str = "NRES",
                          ip: str = None) -> None:
    """Raise RingMismatch listing every setting that differs from the ring's; return quietly when all agree."""
    mine = {"ringId": ring_id, "worldSize": world, "window": window, "msgLen": msg_len, "payloadSize": payload,
            "elementType": dtype, "inetTag": inet_tag, "resultTag": result_tag}
    problems = [f"{key} is {mine[key]!r} here but {parameters.get(key)!r} on the appliance"
                for key in mine if parameters.get(key) != mine[key]]
    if ip is not None:
        member = next((m for m in parameters.get("members", []) if m.get("rank") == rank), None)
        if member is None:
            problems.append(f"rank {rank} is not a member of ring {ring_id}")
        elif member.get("ip") != ip:
            problems.append(f"rank {rank} is {member.get('ip')} on the appliance, but this host sends from {ip}")
    if problems:
        raise RingMismatch(f"ring {ring_id} does not match this client (packets would be dropped and the "
                           f"all-reduce would stall): " + "; ".join(problems))
