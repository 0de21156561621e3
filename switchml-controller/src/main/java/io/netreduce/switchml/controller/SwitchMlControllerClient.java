package io.netreduce.switchml.controller;

import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.AbstractStub;
import io.grpc.stub.MetadataUtils;
import io.netreduce.switchml.controller.proto.BarrierRequest;
import io.netreduce.switchml.controller.proto.BroadcastRequest;
import io.netreduce.switchml.controller.proto.SessionGrpc;
import io.netreduce.switchml.controller.proto.SyncGrpc;
import io.netreduce.switchml.controller.proto.UdpSessionResponse;

import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A client of the SwitchML controller protocol for our own Java SwitchML worker: it registers with the appliance
 * (or with a Tofino's controller) as the published client library does. One channel, plaintext HTTP/2; calls block
 * the calling thread.
 * <p>
 * Errors: a call the controller fails (unreachable, INVALID_ARGUMENT, UNIMPLEMENTED, shutting down, deadline
 * exceeded) throws {@link io.grpc.StatusRuntimeException}; a refused session throws
 * {@link UncheckedSessionRefusedException}.
 */
public final class SwitchMlControllerClient implements AutoCloseable
{
    private final ManagedChannel channel;
    private final SyncGrpc.SyncBlockingStub sync;
    private final SessionGrpc.SessionBlockingStub session;
    private final Duration callTimeout;

    /**
     * A client whose calls wait as long as it takes (as the published client's do: a barrier waits for the
     * slowest worker to start).
     *
     * @param host the controller's host name or address.
     * @param port the controller's port (the published client's default is 50099).
     */
    public SwitchMlControllerClient(final String host, final int port)
    {
        this(host, port, null);
    }

    /**
     * @param host the controller's host name or address.
     * @param port the controller's port.
     * @param callTimeout how long each call may take, or {@code null} for no limit.
     */
    public SwitchMlControllerClient(final String host, final int port, final Duration callTimeout)
    {
        this.channel = NettyChannelBuilder.forAddress(host, port, InsecureChannelCredentials.create()).build();
        this.sync = SyncGrpc.newBlockingStub(channel);
        this.session = SessionGrpc.newBlockingStub(channel);
        this.callTimeout = callTimeout;
    }

    /**
     * Broadcast: the value of the worker whose rank is {@code root} reaches every worker.
     *
     * @param value this worker's value (only the root's matters).
     * @param rank this worker's rank.
     * @param numWorkers the number of workers.
     * @param root the rank whose value is broadcast.
     * @return the root's value.
     */
    public long broadcast(final long value, final int rank, final int numWorkers, final int root)
    {
        return timed(sync).broadcast(BroadcastRequest.newBuilder()
            .setValue(value)
            .setRank(rank)
            .setNumWorkers(numWorkers)
            .setRoot(root)
            .build()).getValue();
    }

    /**
     * Barrier: returns when {@code numWorkers} callers have entered it.
     *
     * @param numWorkers the number of workers.
     */
    public void barrier(final int numWorkers)
    {
        timed(sync).barrier(BarrierRequest.newBuilder().setNumWorkers(numWorkers).build());
    }

    /**
     * Opens this worker's UDP session.
     *
     * @param sessionId the session id (rank 0's choice, broadcast to all).
     * @param rank this worker's rank.
     * @param numWorkers the number of workers.
     * @param mac this worker's MAC, encoded as {@link SwitchMlAddresses} says.
     * @param ipv4 this worker's IPv4 address, host order.
     * @param packetSizeCode 0 to 3: 64, 128, 256 or 512 elements per packet.
     * @return the aggregation point's MAC and address.
     * @throws UncheckedSessionRefusedException when the controller refused the session (the reply's session id is
     *     0); its message is the controller's reason when the controller sent one (this appliance does).
     */
    public UdpSessionReply udpSession(
        final long sessionId, final int rank, final int numWorkers, final long mac, final int ipv4,
        final int packetSizeCode)
    {
        final AtomicReference<Metadata> headers = new AtomicReference<>();
        final AtomicReference<Metadata> trailers = new AtomicReference<>();
        final UdpSessionResponse response = timed(session)
            .withInterceptors(MetadataUtils.newCaptureMetadataInterceptor(headers, trailers))
            .udpSession(io.netreduce.switchml.controller.proto.UdpSessionRequest.newBuilder()
                .setSessionId(sessionId)
                .setRank(rank)
                .setNumWorkers(numWorkers)
                .setMac(mac)
                .setIpv4(ipv4)
                .setPacketSizeValue(packetSizeCode)
                .build());
        if (response.getSessionId() == 0)
        {
            final Metadata received = trailers.get();
            final String reason = received == null ? null : received.get(CallContext.REFUSAL_TRAILER);
            throw new UncheckedSessionRefusedException(new SessionRefusedException(
                "the SwitchML controller refused session " + Long.toUnsignedString(sessionId) + " for rank " + rank +
                    (reason == null ? " (no reason given)" : ": " + reason)));
        }
        return new UdpSessionReply(response.getMac(), response.getIpv4());
    }

    /**
     * The published client's whole set-up sequence (the DPDK backend's {@code SetupSwitch}): rank 0 picks a session
     * id (its clock in nanoseconds since the epoch, as the published client does) and broadcasts it from root 0;
     * then rank 0 opens its session and enters a barrier, while the others enter that barrier first and open theirs
     * after it (so rank 0's request, which clears the session's old state, comes first); a final barrier makes
     * sure every worker is registered before any sends. Every worker must call this at about the same time.
     * <p>
     * A refused session is thrown only after the final barrier, so that one worker's refusal does not leave the
     * others waiting in a barrier for ever.
     *
     * @param rank this worker's rank.
     * @param numWorkers the number of workers.
     * @param mac this worker's MAC, encoded as {@link SwitchMlAddresses} says.
     * @param ipv4 this worker's IPv4 address, host order.
     * @param packetSizeCode 0 to 3: 64, 128, 256 or 512 elements per packet.
     * @return the aggregation point's MAC and address.
     * @throws UncheckedSessionRefusedException when the controller refused this worker's session.
     */
    public UdpSessionReply register(
        final int rank, final int numWorkers, final long mac, final int ipv4, final int packetSizeCode)
    {
        final long proposed = rank == 0 ? newSessionId() : 0;
        final long sessionId = broadcast(proposed, rank, numWorkers, 0);
        UdpSessionReply reply = null;
        UncheckedSessionRefusedException refusal = null;
        if (rank == 0)
        {
            try
            {
                reply = udpSession(sessionId, rank, numWorkers, mac, ipv4, packetSizeCode);
            }
            catch (final UncheckedSessionRefusedException e)
            {
                refusal = e;
            }
            barrier(numWorkers);
        }
        else
        {
            barrier(numWorkers);
            try
            {
                reply = udpSession(sessionId, rank, numWorkers, mac, ipv4, packetSizeCode);
            }
            catch (final UncheckedSessionRefusedException e)
            {
                refusal = e;
            }
        }
        barrier(numWorkers);
        if (refusal != null)
        {
            throw refusal;
        }
        return reply;
    }

    /**
     * Closes the channel; calls in progress fail with CANCELLED or UNAVAILABLE.
     */
    @Override
    public void close()
    {
        channel.shutdownNow();
        try
        {
            channel.awaitTermination(5, TimeUnit.SECONDS);
        }
        catch (final InterruptedException e)
        {
            Thread.currentThread().interrupt();
        }
    }

    private static long newSessionId()
    {
        final Instant now = Instant.now();
        final long nanos = now.getEpochSecond() * 1_000_000_000L + now.getNano();
        return nanos == 0 ? 1 : nanos;
    }

    private <S extends AbstractStub<S>> S timed(final S stub)
    {
        return callTimeout == null ? stub : stub.withDeadlineAfter(callTimeout.toNanos(), TimeUnit.NANOSECONDS);
    }
}
