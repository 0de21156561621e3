package io.netreduce.switchml.controller;

import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.netreduce.switchml.controller.proto.RdmaSessionRequest;
import io.netreduce.switchml.controller.proto.RdmaSessionResponse;
import io.netreduce.switchml.controller.proto.SessionGrpc;
import io.netreduce.switchml.controller.proto.UdpSessionResponse;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetSocketAddress;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The {@code Session} service. A UDP session request is checked, handed to the daemon's {@link UdpSessions} and
 * answered with the appliance's addresses; a refusal is answered as the Tofino controller answers one (session id,
 * MAC and address 0, status OK) with the reason in a trailer. RDMA sessions are not offered.
 */
final class SessionService extends SessionGrpc.SessionImplBase
{
    /** The description of the RDMA refusal. */
    static final String RDMA_UNSUPPORTED = "this appliance speaks SwitchML over UDP only; use the DPDK backend";

    private static final Logger LOG = LoggerFactory.getLogger(SessionService.class.getPackageName());

    private final UdpSessions sessions;
    private final AtomicLong opened = new AtomicLong();
    private final AtomicLong refused = new AtomicLong();
    /** Refusals: any host that reaches the service can call it, so their lines are limited per caller. */
    private final RefusalLog refusals = new RefusalLog(System::nanoTime, LOG::warn);

    SessionService(final UdpSessions sessions)
    {
        this.sessions = Objects.requireNonNull(sessions, "sessions");
    }

    long sessionsOpened()
    {
        return opened.get();
    }

    long sessionsRefused()
    {
        return refused.get();
    }

    @Override
    public void rdmaSession(final RdmaSessionRequest request, final StreamObserver<RdmaSessionResponse> observer)
    {
        final InetSocketAddress peer = CallContext.peer();
        refusals.refused(peer, () -> "SwitchML RDMA session " + Integer.toUnsignedString(request.getSessionId()) +
            " (rank " + Integer.toUnsignedString(request.getRank()) + ") from " + peer +
            " refused: RDMA is not offered");
        observer.onError(Status.UNIMPLEMENTED.withDescription(RDMA_UNSUPPORTED).asRuntimeException());
    }

    @Override
    public void udpSession(
        final io.netreduce.switchml.controller.proto.UdpSessionRequest request,
        final StreamObserver<UdpSessionResponse> responseObserver)
    {
        final ServerCallStreamObserver<UdpSessionResponse> call = SyncService.serverCall(responseObserver);
        final InetSocketAddress peer = CallContext.peer();
        final String invalid = check(request);
        if (invalid != null)
        {
            refused.incrementAndGet();
            refusals.refused(peer, () -> "SwitchML UDP session request from " + peer + " refused: " + invalid);
            SyncService.fail(call, Status.INVALID_ARGUMENT.withDescription("UdpSession: " + invalid));
            return;
        }
        final UdpSessionRequest session = new UdpSessionRequest(request.getSessionId(), request.getRank(),
            request.getNumWorkers(), request.getMac(), request.getIpv4(), request.getPacketSizeValue(), peer);
        final UdpSessionReply reply;
        try
        {
            reply = sessions.open(session);
            if (reply == null)
            {
                throw new IllegalStateException("UdpSessions.open returned null");
            }
        }
        catch (final SessionRefusedException e)
        {
            refused.incrementAndGet();
            refusals.refused(peer, () -> "SwitchML UDP session " + Long.toUnsignedString(session.sessionId()) +
                " rank " + session.rank() + "/" + session.numWorkers() + " (" + session.macText() + " " +
                session.ipv4Text() + ") from " + peer + " refused: " + e.getMessage());
            CallContext.refuse(String.valueOf(e.getMessage()));
            SyncService.answer(call, UdpSessionResponse.newBuilder().setSessionId(0).setMac(0).setIpv4(0).build());
            return;
        }
        catch (final RuntimeException e)
        {
            refused.incrementAndGet();
            LOG.error("SwitchML UDP session {} rank {}/{} from {}: the appliance failed to open it",
                Long.toUnsignedString(session.sessionId()), session.rank(), session.numWorkers(), peer, e);
            SyncService.fail(call, Status.INTERNAL.withDescription("the appliance failed to open the session: " + e));
            return;
        }
        opened.incrementAndGet();
        LOG.info("SwitchML UDP session {} rank {}/{} ({} {}, packet size code {}) from {} opened",
            Long.toUnsignedString(session.sessionId()), session.rank(), session.numWorkers(), session.macText(),
            session.ipv4Text(), session.packetSizeCode(), peer);
        SyncService.answer(call, UdpSessionResponse.newBuilder()
            .setSessionId(session.sessionId())
            .setMac(reply.mac())
            .setIpv4(reply.ipv4())
            .build());
    }

    private static String check(final io.netreduce.switchml.controller.proto.UdpSessionRequest request)
    {
        final int numWorkers = request.getNumWorkers();
        if (numWorkers == 0 || Integer.compareUnsigned(numWorkers, SwitchMlController.MAX_WORKERS) > 0)
        {
            return "num_workers must be 1 to " + SwitchMlController.MAX_WORKERS + ", not " +
                Integer.toUnsignedString(numWorkers);
        }
        if (Integer.compareUnsigned(request.getRank(), numWorkers) >= 0)
        {
            return "rank " + Integer.toUnsignedString(request.getRank()) + " is not below num_workers " + numWorkers;
        }
        if (request.getSessionId() == 0)
        {
            return "session_id 0 is the protocol's refusal, not a session";
        }
        if ((request.getMac() & ~SwitchMlAddresses.MAC_MASK) != 0)
        {
            return "mac 0x" + Long.toHexString(request.getMac()) + " has bits above the low 48";
        }
        return null;
    }
}
