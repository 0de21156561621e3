"""Two sessions of one sidecar agent (`netreduce worker agent`) in a ring of two ranks, no appliance, no PyTorch: the
check the systemd-agent scenario runs as the trainers' user on a host whose agent runs under the shipped unit.

Each rank is a `netreduce.sidecar.SidecarTransport` with `agent=SOCKET` (the agent makes its session's control
socket in the caller's private directory and maps its shared memory from /dev/shm, as for a trainer). The ring's
result tag is its InetTag, so no appliance is needed: each rank takes its predecessor's message for the call's
result (as the agent's own start warm-up does), and the check is that every rank's output area holds exactly its
predecessor's input. Every call goes through the whole path a trainer's does: the doorbell, the RC queue pairs over
the agent's AF_PACKET port, the ICRC, the acknowledgements.

    python3 scripts/interop/agent_ring.py [--agent /run/netreduce-agent-lo/agent.sock] [--calls 3] [--elements N]

Without --agent, each rank is made as a Session makes its sidecar (netreduce.sidecar.sidecar_transport): it must find
the shipped unit's socket for lo by itself.

Prints one JSON line ({"ok": true, ...}); exit status 0 when every call of both ranks was exact.
"""
import argparse
import json
import os
import struct
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

from netreduce.sidecar import SetupError, default_first_qpn, sidecar_transport  # noqa: E402

INA_LENGTH = 8


def fill(transport, rank: int, call: int, elements: int) -> list:
    """Write distinct int32 values into the first ``elements`` data slots of the input area; return them."""
    layout = transport.layout
    per_message = (layout["messageBytes"] - INA_LENGTH) // 4
    values = []
    for i in range(elements):
        message, slot = divmod(i, per_message)
        value = (rank * 1_000_003 + call * 7_919 + i * 31) & 0x7FFFFFFF
        struct.pack_into("<i", transport.memory, layout["input"] + message * layout["messageBytes"] + INA_LENGTH +
                         4 * slot, value)
        values.append(value)
    return values


def read(transport, elements: int) -> list:
    layout = transport.layout
    per_message = (layout["messageBytes"] - INA_LENGTH) // 4
    out = []
    for i in range(elements):
        message, slot = divmod(i, per_message)
        out.append(struct.unpack_from("<i", transport.memory, layout["output"] + message * layout["messageBytes"] +
                                      INA_LENGTH + 4 * slot)[0])
    return out


def main(argv) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agent", help="the agent's socket; without it, the one a Session finds for lo (the "
                        "shipped unit's /run/netreduce-agent-lo/agent.sock), and the check fails if none is found")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--elements", type=int, default=65_536)
    parser.add_argument("--timeout", type=float, default=600.0, help="session start and call timeout, seconds")
    args = parser.parse_args(argv)
    ring = {"ringId": 7, "elementType": "int32", "window": 8, "msgLen": 4, "payloadSize": 1024,
            "inetTag": "NRED", "resultTag": "NRED", "timeoutMs": int(args.timeout * 1000)}
    ranks = []
    try:
        for rank in range(2):
            # two sessions from one process: QP ranges of their own, as two trainers' would have
            try:
                ranks.append(sidecar_transport("lo", 1 << 20, 1024, agent=args.agent, start_timeout=args.timeout,
                                               first_qpn=default_first_qpn() + rank * 0x100))
            except SetupError as error:
                # no agent and no sidecar of our own either (e.g. no `netreduce` command): a failed check, not a trace
                print(json.dumps({"ok": False, "rank": rank, "errors": [f"no session: {error}"]}))
                return 1
        if args.agent is None and not all(t.agent_session for t in ranks):
            print(json.dumps({"ok": False, "errors": ["no agent found for lo: a sidecar of our own started"]}))
            return 1
        infos = [t.open(rank=r, world=2, ring=ring) for r, t in enumerate(ranks)]
        for r, t in enumerate(ranks):
            t.connect(infos[(r + 1) % 2]["receive"], infos[(r - 1) % 2]["send"])
        exact = []
        for call in range(args.calls):
            inputs = [fill(t, r, call, args.elements) for r, t in enumerate(ranks)]
            errors = []

            def run(t):
                try:
                    t.allreduce(args.elements)
                    t.wait_input()
                except Exception as error:  # noqa: BLE001 (reported below)
                    errors.append(repr(error))

            threads = [threading.Thread(target=run, args=(t,)) for t in ranks]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(args.timeout)
            if errors or any(thread.is_alive() for thread in threads):
                print(json.dumps({"ok": False, "call": call, "errors": errors or ["a call did not return"]}))
                return 1
            exact.append(all(read(t, args.elements) == inputs[(r - 1) % 2] for r, t in enumerate(ranks)))
        stats = [t.stats() for t in ranks]
        print(json.dumps({"ok": all(exact), "exact": exact, "elements": args.elements, "ip": infos[0]["ip"],
                          "via": [t.agent_session for t in ranks], "stats": stats}))
        return 0 if all(exact) else 1
    finally:
        for t in ranks:
            t.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
