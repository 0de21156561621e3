"""The TCP side channel of a ring: each rank connects to its successor and accepts its predecessor.

Used to exchange RC connection parameters (QPN, PSN, GID, buffer address and R_Key) and for barriers. Messages
are length-prefixed JSON. Nothing on this channel is on the data path.
"""
import json
import socket
import struct
import time


class TcpRing:
    """Side-channel sockets to the ring neighbours of rank `rank` among `peers` (IP addresses by rank)."""

    def __init__(self, rank: int, peers: list, port: int, timeout: float = 120.0):
        self.rank = rank
        self.world = len(peers)
        if not 0 <= rank < self.world:
            raise ValueError(f"rank {rank} out of 0..{self.world - 1}")
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((peers[rank], port))
        self._listener.listen(1)
        self._listener.settimeout(timeout)
        successor = peers[(rank + 1) % self.world]
        deadline = time.monotonic() + timeout
        self.succ = None
        # Connect and accept interleaved would need threads; ranks start at different times, so keep retrying the
        # connect (the successor may not listen yet) and accept afterwards: every rank connects before it accepts,
        # and every listen queue holds the one pending connection.
        while self.succ is None:
            try:
                self.succ = socket.create_connection((successor, port), timeout=5)
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"rank {rank}: successor {successor}:{port} not reachable") from None
                time.sleep(0.2)
        self.pred, _ = self._listener.accept()
        for s in (self.succ, self.pred):
            s.settimeout(timeout)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    @staticmethod
    def _send(sock: socket.socket, obj) -> None:
        data = json.dumps(obj).encode()
        sock.sendall(struct.pack("!I", len(data)) + data)

    @staticmethod
    def _recv_exact(sock: socket.socket, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("ring side channel closed by peer")
            buf += chunk
        return bytes(buf)

    @classmethod
    def _recv(cls, sock: socket.socket):
        (n,) = struct.unpack("!I", cls._recv_exact(sock, 4))
        return json.loads(cls._recv_exact(sock, n))

    def send_succ(self, obj) -> None:
        self._send(self.succ, obj)

    def send_pred(self, obj) -> None:
        self._send(self.pred, obj)

    def recv_succ(self):
        return self._recv(self.succ)

    def recv_pred(self):
        return self._recv(self.pred)

    def barrier(self, name: str) -> None:
        """All ranks arrive (token once round the ring), then all leave (token round again)."""
        for phase in ("arrive", "leave"):
            token = {"barrier": name, "phase": phase}
            if self.rank == 0:
                self.send_succ(token)
                got = self.recv_pred()
            else:
                got = self.recv_pred()
                self.send_succ(token)
            if got != token:
                raise RuntimeError(f"rank {self.rank}: barrier {name}/{phase} got {got}")

    def allgather(self, obj) -> list:
        """Every rank's obj, by rank (passed world-1 times round the ring)."""
        out = [None] * self.world
        out[self.rank] = obj
        carry = (self.rank, obj)
        for _ in range(self.world - 1):
            self.send_succ(list(carry))
            r, o = self.recv_pred()
            out[r] = o
            carry = (r, o)
        return out

    def close(self) -> None:
        for s in (self.succ, self.pred, self._listener):
            try:
                s.close()
            except OSError:
                pass
