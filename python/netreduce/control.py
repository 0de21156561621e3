"""A small client for the appliance's control API: read a ring's parameters, install or remove a job.

The API listens on a Unix socket by default (``unix:/run/netreduce/api.sock``, owner-only), or on TCP
(``http://127.0.0.1:9740``) where writes need the bearer token from the daemon's token file. Only the standard
library is used: a trainer's environment should not need more to reach its appliance.
"""
import http.client
import json
import socket
from typing import Optional

from .errors import ApplianceUnreachable, RingMismatch, SetupError


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


class ApplianceClient:
    """The control API at ``address``: ``unix:/path`` or ``http://host:port``."""

    def __init__(self, address: str, token_file: Optional[str] = None, timeout: float = 10.0):
        self.address = address
        self.timeout = timeout
        self._token = None
        if token_file:
            try:
                with open(token_file, encoding="ascii") as f:
                    self._token = f.read().strip()
            except OSError as error:
                raise SetupError(f"cannot read the API token file {token_file}: {error}") from error

    def _connection(self) -> http.client.HTTPConnection:
        if self.address.startswith("unix:"):
            return _UnixConnection(self.address[len("unix:"):], self.timeout)
        if self.address.startswith("http://"):
            hostport = self.address[len("http://"):].rstrip("/")
            return http.client.HTTPConnection(hostport, timeout=self.timeout)
        raise SetupError(f"appliance address must be unix:/path or http://host:port: {self.address!r}")

    def request(self, method: str, path: str, body=None):
        """(status, decoded JSON or text) of one request; ApplianceUnreachable if it could not be made."""
        headers = {}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self._token:
            headers["Authorization"] = "Bearer " + self._token
        connection = self._connection()
        try:
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            raw = response.read().decode("utf-8", "replace")
        except (OSError, http.client.HTTPException) as error:
            raise ApplianceUnreachable(f"control API {self.address}: {method} {path}: cannot read an answer: {error}") \
                from error
        finally:
            connection.close()
        try:
            return response.status, json.loads(raw) if raw else None
        except ValueError:
            return response.status, raw

    def ring_parameters(self, ring_id: int) -> dict:
        status, body = self.request("GET", f"/v1/rings/{ring_id}/parameters")
        if status == 404:
            raise RingMismatch(f"ring {ring_id} is not installed on the appliance at {self.address}")
        if status != 200:
            raise ApplianceUnreachable(f"control API {self.address}: ring {ring_id} parameters: HTTP {status} {body}")
        return body

    def add_job(self, job: dict) -> None:
        status, body = self.request("POST", "/v1/jobs", job)
        if status != 201:
            raise SetupError(f"the appliance at {self.address} refused job {job.get('name')!r}: HTTP {status} {body}")

    def remove_job(self, name: str) -> bool:
        status, _ = self.request("DELETE", f"/v1/jobs/{name}")
        return status in (200, 204)


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
