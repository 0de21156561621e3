package io.netreduce.switchml.controller;

/**
 * What the daemon does when a worker opens a UDP session (the published client's DPDK backend). Called on gRPC
 * threads, possibly several at once; implementations are thread-safe. A call may take its time (wait for the
 * dataplane), but it holds one of the controller's few handler threads while it does.
 */
public interface UdpSessions
{
    /**
     * Opens (or joins) the session the request names, for the request's worker.
     * <p>
     * Rank 0's request comes first: the published client sends it before a barrier that the other ranks wait on,
     * so it is the place to clear what an earlier session with that id left (the Tofino controller clears its
     * workers there). The controller has checked that {@code numWorkers} is 1 to
     * {@link SwitchMlController#MAX_WORKERS}, that {@code rank < numWorkers} and that the MAC fits 48 bits; the
     * packet size code is passed as received (the published client sends 0 to 3).
     *
     * @param request the worker's request, with the address the request came from.
     * @return the appliance's SwitchML MAC and IPv4 address, which the worker will send its packets to.
     * @throws SessionRefusedException when the worker may not join: its message is logged and sent back to the
     *     caller, which receives the refusal of the published protocol (session id, MAC and address 0).
     */
    UdpSessionReply open(UdpSessionRequest request) throws SessionRefusedException;
}
