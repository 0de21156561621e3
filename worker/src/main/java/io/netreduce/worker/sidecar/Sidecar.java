package io.netreduce.worker.sidecar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netreduce.host.allreduce.AllReduceException;
import io.netreduce.host.allreduce.CongestionControl;
import io.netreduce.host.allreduce.CongestionWindow;
import io.netreduce.host.allreduce.NetReduceAllReduce;
import io.netreduce.host.allreduce.NetReduceConfig;
import io.netreduce.host.allreduce.RingLink;
import io.netreduce.host.allreduce.RingWarmUp;
import io.netreduce.host.rc.ConnectionInfo;
import io.netreduce.host.rc.EndpointIdleStrategy;
import io.netreduce.host.rc.RcEndpoint;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.wire.InaHeader;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.SystemNanoClock;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * A trainer's all-reduce engine in its own process: the software RC endpoint and one NetReduce ring link, driven
 * by one thread, serving requests from the trainer over a {@link ControlChannel}. The trainer's buckets sit in a
 * shared memory file that the sidecar maps once, and that mapping is the endpoint's registered memory: its first
 * {@code messages x messageBytes} bytes (messageBytes = MsgLen x payloadSize, messages = shmBytes / 2 messageBytes)
 * are the <i>input area</i>, registered as the ring link's send region, and the next as many the <i>output area</i>,
 * its receive region (the one advertised to the predecessor). Both are in message layout: message i of a call at
 * i x messageBytes, its data behind 8 bytes left for the INA header. The trainer writes a bucket into the input
 * area's data parts, the {@link NetReduceAllReduce#placed placement-mode} all-reduce posts every message straight
 * from there (writing only its header) and the appliance's sums land in the output area, checked in place; the
 * trainer reads them from the output area's data parts. The sidecar copies no tensor byte.
 * <p>
 * Requests: {@code open} (ring parameters and the shared file; answers this rank's connection info for the ring
 * neighbours and the areas' geometry), {@code connect} (the neighbours' info), {@code allreduce} (elements in the
 * input area; answered when the sum is in the output area or with the error; on the call page, when the trainer asked
 * for it, before the call's own writes are acknowledged, the input area released apart: {@link CallPage}), {@code stats}, {@code close}; the
 * loop, its dispatch and the mapping are {@link SidecarLoop}'s. The open may say how the window follows ECN marks
 * ({@code ecnWindow}, {@code ecnGain}, {@code ecnMinWindow}; {@link CongestionWindow}), and {@code stats} reports the window, alpha and the
 * marked results. One call runs at a time; requests queue in order.
 * Between calls the loop keeps the endpoint running, so neighbours' retransmissions are answered while this
 * trainer computes. It blocks in poll(2) on the port and the doorbell, so an idle sidecar takes no CPU.
 */
final class Sidecar extends SidecarLoop
{
    /** Warm-up duty cycles per idle turn: short enough that a request waits for at most a few of them. */
    private static final int WARM_UP_TURNS = 4;

    private final RcEndpoint endpoint;
    private final IdleStrategy idle;
    private final CongestionControl defaults;
    private final long warmUpFrames;

    private RingLink link;
    private boolean warmUpPending;
    private RingWarmUp warmUp;
    private RingWarmUp.Report warmedUp;
    private NetReduceAllReduce op;
    private NetReduceConfig opConfig;
    private ElementType elementType;
    private int areaMessages;

    Sidecar(final RcEndpoint endpoint, final ControlChannel control, final IdleStrategy idle)
    {
        this(endpoint, control, idle, CongestionControl.DEFAULT, 0);
    }

    /**
     * @param defaults congestion control for an open that does not say ({@code ecnWindow}, {@code ecnGain},
     *                 {@code ecnMinWindow}); {@code worker serve} gives {@link CongestionControl#DEFAULT}, having no
     *                 options of its own for them.
     * @param warmUpFrames frames of a {@link RingWarmUp} run once the ring is connected, while no call has come
     *                     ({@code worker serve --warm-up-frames}); 0 for none.
     */
    Sidecar(final RcEndpoint endpoint, final ControlChannel control, final IdleStrategy idle,
        final CongestionControl defaults, final long warmUpFrames)
    {
        super(control);
        this.endpoint = endpoint;
        this.idle = idle;
        this.defaults = defaults;
        this.warmUpFrames = warmUpFrames;
    }

    @Override
    IdleStrategy idleStrategy()
    {
        return idle;
    }

    @Override
    int doWork()
    {
        return endpoint.doWork();
    }

    @Override
    int pollCall() throws CallFailedException
    {
        try
        {
            return op.poll();
        }
        catch (final AllReduceException ex)
        {
            throw new CallFailedException(ex.getMessage());
        }
    }

    @Override
    boolean callDone()
    {
        return op.resultsDone();
    }

    /**
     * The call's own writes are all acknowledged: until then a retransmission may read the input area.
     */
    @Override
    boolean inputReleased()
    {
        return op.writesAcknowledged();
    }

    @Override
    ObjectNode open(final JsonNode request, final ObjectNode reply) throws IOException
    {
        if (link != null)
        {
            throw new IllegalStateException("open: this sidecar already serves a ring (one per trainer process)");
        }
        final int rank = Requests.intField(request, "rank");
        final int world = Requests.intField(request, "world");
        if (world < 2 || world > 64 || rank < 0 || rank >= world)
        {
            throw new IllegalArgumentException("open: need 2 <= world <= 64 and 0 <= rank < world: rank " + rank +
                ", world " + world);
        }
        final String typeName = Requests.textField(request, "elementType", "fp32");
        elementType = ElementType.fromCliName(typeName);
        if (elementType == null)
        {
            throw new IllegalArgumentException("open: elementType must be fp32, fp16, bf16 or int32: '" + typeName +
                "'");
        }
        final int payload = Requests.intField(request, "payloadSize");
        if (payload != endpoint.config().pmtu())
        {
            throw new IllegalArgumentException("open: payloadSize " + payload + " must equal the sidecar's PMTU " +
                endpoint.config().pmtu() + " (its --pmtu)");
        }
        final NetReduceConfig config = new NetReduceConfig(Requests.intField(request, "ringId"),
            Requests.intField(request, "window"), Requests.intField(request, "msgLen"), payload,
            TimeUnit.MILLISECONDS.toNanos(Requests.longField(request, "timeoutMs", 10_000)),
            tag("inetTag", Requests.textField(request, "inetTag", "NRED")),
            tag("resultTag", Requests.textField(request, "resultTag", "NRES")),
            congestion(request));
        final long shmBytes = Requests.longField(request, "shmBytes", -1);
        final int messageBytes = config.messageBytes();
        final long messages = shmBytes / (2L * messageBytes);
        if (shmBytes > 0 && messages == 0)
        {
            throw new IllegalArgumentException("open: shmBytes " + shmBytes + " holds no message: the input and " +
                "output areas need at least 2 x MsgLen x payloadSize = " + 2L * messageBytes + " bytes");
        }
        final ByteBuffer shared = mapShared(Path.of(Requests.textField(request, "shm", null)), shmBytes);
        final int areaBytes = (int)(messages * messageBytes);
        // The regions are the mapping itself (slices share its memory): the input area is what messages are sent
        // from, the output area what the predecessor's connection writes the sums into.
        link = new RingLink(endpoint, SystemNanoClock.INSTANCE, rank, world,
            endpoint.registerMemory(shared.slice(0, areaBytes)),
            endpoint.registerMemory(shared.slice(areaBytes, areaBytes)));
        areaMessages = (int)messages;
        opConfig = config;
        reply.put("messages", areaMessages);
        reply.put("messageBytes", messageBytes);
        reply.put("input", 0);
        reply.put("output", areaBytes);
        reply.put("send", link.sendInfo().toLine());
        reply.put("receive", link.receiveInfo().toLine());
        reply.put("ip", endpoint.localIp().getHostAddress());
        reply.put("mac", ConnectionInfo.formatMac(endpoint.localMac()));
        return reply;
    }

    @Override
    void connect(final JsonNode request)
    {
        if (link == null)
        {
            throw new IllegalStateException("connect before open");
        }
        if (op != null)
        {
            throw new IllegalStateException("connect: already connected");
        }
        final ConnectionInfo successor = ConnectionInfo.parse(Requests.textField(request, "successor", null));
        final ConnectionInfo predecessor = ConnectionInfo.parse(Requests.textField(request, "predecessor", null));
        link.connect(successor, predecessor);
        op = NetReduceAllReduce.placed(link, opConfig, areaMessages);
        warmUpPending = warmUpFrames > 0;
    }

    /**
     * Between the connect and the first call the trainer builds its model and runs its first backward pass: the
     * ring's path is compiled meanwhile, on a ring in memory of this ring's shape, made on the first idle turn (not in
     * the connect, whose reply the trainer waits for) and stopped at the first call whatever it has done.
     */
    @Override
    int idleWork()
    {
        if (warmUpPending)
        {
            warmUpPending = false;
            warmUp = RingWarmUp.inMemory(endpoint.config(), opConfig.window(), opConfig.msgLen(), elementType,
                Math.min(areaMessages, 2 * opConfig.window()), warmUpFrames);
            return 1;
        }
        final RingWarmUp running = warmUp;
        if (running == null)
        {
            return 0;
        }
        int work = 0;
        for (int i = 0; i < WARM_UP_TURNS; i++)
        {
            work += running.doWork();
        }
        if (running.finished(warmUpFrames, RingWarmUp.DEFAULT_MAX_NANOS))
        {
            endWarmUp();
        }
        return Math.max(work, 1);
    }

    private void endWarmUp()
    {
        warmUpPending = false;
        if (warmUp != null)
        {
            warmedUp = warmUp.report();
            warmUp.close();
            warmUp = null;
        }
    }

    @Override
    void checkCallRequest(final JsonNode request)
    {
        if (request.has("offset"))
        {
            throw new IllegalArgumentException("allreduce: there is no \"offset\" any more: a call's data are " +
                "the input area's messages from the first on (see open's reply)");
        }
    }

    @Override
    void beginCall(final long elements) throws CallFailedException
    {
        endWarmUp();
        if (op == null)
        {
            throw new IllegalStateException("allreduce before connect");
        }
        final long dataBytes = opConfig.dataBytesPerMessage();
        final long messages = elements > 0 ? (elements * elementType.size() + dataBytes - 1) / dataBytes : 0;
        if (elements <= 0 || messages > areaMessages)
        {
            throw new IllegalArgumentException("allreduce: " + elements + " " + elementType.cliName() +
                " elements do not fit the input area: it holds " + areaMessages + " messages of " + dataBytes +
                " data bytes (" + areaMessages * dataBytes / elementType.size() + " elements)");
        }
        try
        {
            op.beginPlaced((int)messages);
        }
        catch (final AllReduceException ex)
        {
            // A neighbour's message that came through unaggregated before this call (the ring not installed, or the
            // traffic bypassing the appliance): this call's first window is posted, and the loop's next duty cycle
            // sends it, so the neighbour fails for the same reason. Thrown out of the loop, it ended the sidecar
            // before that, and the neighbour waited for its timeout.
            throw new CallFailedException(ex.getMessage());
        }
    }

    @Override
    void stats(final ObjectNode reply)
    {
        if (op != null)
        {
            final var send = link.sendQp().counters();
            final CongestionWindow window = op.congestion();
            reply.put("bytesPosted", op.bytesPosted())
                .put("retransmittedPackets", send.retransmittedPackets())
                .put("timeouts", send.timeouts())
                .put("ecnWindow", window.enabled())
                .put("window", window.window())
                .put("windowCap", window.cap())
                .put("windowFloor", window.floor())
                .put("windowMin", window.minWindow())
                .put("alpha", window.alpha())
                .put("results", window.results())
                .put("markedResults", window.markedResults())
                .put("windowCuts", window.decreases())
                .put("acksSent", link.receiveQp().counters().acksSent() + send.acksSent())
                .put("callsWaitingForAcks", op.callsWaitingForAcks())
                .put("ackWaitUs", op.ackWaitNs() / 1_000);
        }
        final RingWarmUp.Report warm = warmUp != null ? warmUp.report() : warmedUp;
        if (warm != null)
        {
            reply.put("warmUpFrames", warm.frames())
                .put("warmUpCalls", warm.calls())
                .put("warmUpMs", warm.nanos() / 1_000_000)
                .put("warmUpResent", warm.resent())
                .put("warmingUp", warmUp != null);
            if (warm.failure() != null)
            {
                reply.put("warmUpFailure", warm.failure());
            }
        }
        if (idle instanceof EndpointIdleStrategy endpointIdle)
        {
            // how the loop waited, over the sidecar's life (docs/performance.md, the endpoint's CPU)
            reply.put("idleBlocks", endpointIdle.blocks())
                .put("idleYields", endpointIdle.yields())
                .put("expeditedAcks", endpointIdle.expeditedAcks());
        }
    }

    /**
     * The open's {@code ecnWindow} (default true), {@code ecnGain} (default 1/16) and {@code ecnMinWindow} (default
     * 1, the floor in messages): how the window follows ECN marks on results ({@link CongestionWindow}).
     */
    private CongestionControl congestion(final JsonNode request)
    {
        final double gain = Requests.doubleField(request, "ecnGain", defaults.gain());
        if (!(gain > 0 && gain <= 1))
        {
            throw new IllegalArgumentException("open: ecnGain must be in (0, 1]: " + gain);
        }
        final long minWindow = Requests.longField(request, "ecnMinWindow", defaults.minWindow());
        if (minWindow < 1 || minWindow > Integer.MAX_VALUE)
        {
            throw new IllegalArgumentException("open: ecnMinWindow must be at least 1: " + minWindow);
        }
        return new CongestionControl(Requests.booleanField(request, "ecnWindow", defaults.enabled()), gain,
            (int)minWindow);
    }

    private static int tag(final String name, final String text)
    {
        try
        {
            return InaHeader.tagValue(text);
        }
        catch (final IllegalArgumentException ex)
        {
            throw new IllegalArgumentException("open: " + name + " " + ex.getMessage(), ex);
        }
    }
}
