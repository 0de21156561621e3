"""What a client checks with the appliance before it sends: the ring's parameters.

A client whose window, MsgLen, payload size, element type or InetTag differ from the ring's does not fail: it
stalls until its RC timeout, while the appliance drops its packets under counters the client never sees. So a
session reads the ring's parameters from the control API (GET /v1/rings/{id}/parameters) when it starts and
refuses to run on any mismatch, naming each one.
"""
# One definition of the check and its errors, in the netreduce package; this module keeps its names for the
# standalone client.
from netreduce.control import ApplianceClient, check_ring_parameters  # noqa: F401
from netreduce.errors import ApplianceUnreachable, RingMismatch  # noqa: F401


def fetch_ring_parameters(api: str, ring_id: int, timeout: float = 5.0) -> dict:
    """The ring's parameters as the appliance reports them. api: the control API, http://HOST:PORT or unix:/PATH."""
    return ApplianceClient(api, timeout=timeout).ring_parameters(ring_id)
