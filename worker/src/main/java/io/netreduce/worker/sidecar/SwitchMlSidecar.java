package io.netreduce.worker.sidecar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netreduce.host.switchml.ExponentQuantizer;
import io.netreduce.host.switchml.SwitchMlWorker;
import io.netreduce.protocol.port.FrameHandler;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.port.PortPollIdleStrategy;
import io.netreduce.protocol.port.PortPoller;
import io.netreduce.protocol.wire.EthernetHeader;
import io.netreduce.protocol.wire.SwitchMlHeader;
import org.agrona.concurrent.IdleStrategy;

import java.io.IOException;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * A trainer's SwitchML worker in its own process ({@code netreduce worker serve --protocol switchml}): a
 * {@link SwitchMlWorker} on the sidecar's port, serving the trainer's requests as {@link SidecarLoop} dispatches them.
 * <ul>
 *   <li>{@code open} ({@code rank}, {@code world}, {@code elementType} fp32 or int32, {@code timeoutMs}, {@code shm},
 *       {@code shmBytes}): maps the shared memory, registers this worker with the SwitchML controller (the
 *       {@link Registrar}: the published client's set-up, which opens the session's job on the appliance and waits
 *       for every rank), and answers this worker's {@code ip} and {@code mac}, the switch's {@code switchIp} and
 *       {@code switchMac}, {@code elementType}, {@code elementsPerPacket}, {@code udpPort} and {@code elements}: how
 *       many values a call may take (shmBytes / 4).</li>
 *   <li>{@code connect}: nothing to connect (SwitchML has no ring); answered ok.</li>
 *   <li>{@code allreduce} ({@code elements}): sums the first {@code elements} values of the shared memory (native
 *       byte order, the trainer's) across the workers in place; answered with {@code us} when the sums are there.
 *       int32 sums are exact (wrapping), fp32 sums within the block fixed point's bound
 *       ({@link ExponentQuantizer}); a call with a NaN, an infinity or a magnitude of 2<sup>127</sup> or more is
 *       refused before anything is sent.</li>
 *   <li>{@code stats}: {@code calls}, {@code failedCalls}, {@code framesSent}, {@code retransmittedPackets},
 *       {@code strayResults}.</li>
 * </ul>
 * <b>Copies.</b> The worker quantizes from and dequantizes into a Java array ({@code float[]} or {@code int[]}), so a
 * call copies its values from the mapping into one array the sidecar keeps (as large as the mapping) and the sums
 * back: two bulk copies at memory speed (a few ms for 64 MiB), small beside the call's packets.
 * <p>
 * A call that gets no result for {@code timeoutMs} fails, and the worker takes no other (its job's slots hold partial
 * sums until the session is opened again): its packets are not sent again and every later call is refused.
 */
public final class SwitchMlSidecar extends SidecarLoop
{
    /** The longest block in poll(2) during a call: the retransmission timer is the worker's, not seen from here. */
    static final int CALL_MAX_BLOCK_MS = 1;
    /** The longest block between calls: the doorbell wakes the loop for a request, a frame for a result. */
    static final int IDLE_MAX_BLOCK_MS = 100;

    /**
     * The switch a worker sends to.
     */
    public record Switch(long mac, int ip)
    {
    }

    /**
     * Registers a worker of a SwitchML session (with the appliance's controller): blocks until the session's job is
     * open for every rank.
     */
    @FunctionalInterface
    public interface Registrar
    {
        /**
         * @throws IllegalStateException if the session is refused or the controller cannot be reached (the message
         *                               is the trainer's).
         */
        Switch register(int rank, int world, long workerMac, int workerIp, int elementsPerPacket);
    }

    /**
     * @param elementsPerPacket the session's elements per packet.
     * @param outstanding       packets in flight (at most the session's pool).
     * @param timeoutNs         a packet's retransmission timeout.
     * @param udpPortBase       rank r sends from UDP port udpPortBase + r.
     */
    public record Settings(int elementsPerPacket, int outstanding, long timeoutNs, int udpPortBase)
    {
    }

    private static final FrameHandler IGNORE = (buffer, offset, length, flags) ->
    {
    };

    private final PacketPort port;
    private final PortPoller poller;
    private final long localMac;
    private final int localIp;
    private final Settings settings;
    private final Registrar registrar;
    private final LongSupplier clock;

    private SwitchMlWorker worker;
    private boolean int32;
    private long deadlineNs;
    private FloatBuffer sharedFloats;
    private IntBuffer sharedInts;
    private float[] floats;
    private int[] ints;
    private int capacity;
    private int callElements;
    private int lastResults;
    private long lastProgressNs;
    private boolean resultsCopied;
    /** Why a call failed: the worker takes no other (its job's slots hold that call's partial sums). */
    private String failure;

    /**
     * @param poller waits on the port and the control channel's doorbell.
     */
    SwitchMlSidecar(
        final PacketPort port, final PortPoller poller, final long localMac, final int localIp,
        final Settings settings, final Registrar registrar, final ControlChannel control)
    {
        super(control);
        this.port = port;
        this.poller = poller;
        this.localMac = localMac;
        this.localIp = localIp;
        this.settings = settings;
        this.registrar = registrar;
        this.clock = System::nanoTime;
    }

    @Override
    IdleStrategy idleStrategy()
    {
        return new PortPollIdleStrategy(poller, PortPollIdleStrategy.DEFAULT_SPINS, PortPollIdleStrategy.DEFAULT_YIELDS,
            () -> inCall() ? CALL_MAX_BLOCK_MS : IDLE_MAX_BLOCK_MS);
    }

    @Override
    int doWork()
    {
        // Between calls too: the port is drained (late results counted stray), or poll(2) would wake at once. A
        // failed call's packets are not sent again: the worker is given up.
        return worker != null && failure == null ? worker.doWork() : port.receive(IGNORE, 64);
    }

    @Override
    ObjectNode open(final JsonNode request, final ObjectNode reply) throws IOException
    {
        if (worker != null)
        {
            throw new IllegalStateException("open: this sidecar already serves a SwitchML session (one per trainer " +
                "process)");
        }
        final int rank = Requests.intField(request, "rank");
        final int world = Requests.intField(request, "world");
        if (world < 2 || world > ExponentQuantizer.MAX_WORKERS || rank < 0 || rank >= world)
        {
            throw new IllegalArgumentException("open: need 2 <= world <= " + ExponentQuantizer.MAX_WORKERS +
                " and 0 <= rank < world: rank " + rank + ", world " + world);
        }
        final String type = Requests.textField(request, "elementType", "fp32");
        if (!"fp32".equals(type) && !"int32".equals(type))
        {
            throw new IllegalArgumentException("open: elementType must be fp32 (block fixed point) or int32 (exact) " +
                "with SwitchML, not '" + type + "'");
        }
        final long timeoutMs = Requests.longField(request, "timeoutMs", 10_000);
        if (timeoutMs < 1)
        {
            throw new IllegalArgumentException("open: timeoutMs must be positive: " + timeoutMs);
        }
        final long shmBytes = Requests.longField(request, "shmBytes", -1);
        if (shmBytes > 0 && shmBytes < Float.BYTES)
        {
            throw new IllegalArgumentException("open: shmBytes " + shmBytes + " holds no element");
        }
        final ByteBuffer shared = mapShared(Path.of(Requests.textField(request, "shm", null)), shmBytes);
        final int udpPort = settings.udpPortBase() + rank;
        if (udpPort > 0xFFFF)
        {
            throw new IllegalArgumentException("open: rank " + rank + "'s UDP port " + udpPort + " is beyond 65535 " +
                "(--udp-port-base)");
        }
        final Switch target = registrar.register(rank, world, localMac, localIp, settings.elementsPerPacket());
        worker = new SwitchMlWorker(new SwitchMlWorker.Config(localMac, localIp, udpPort, target.mac(), target.ip(),
            SwitchMlHeader.PORT_BASE, 0, world, settings.elementsPerPacket(), settings.outstanding(),
            settings.timeoutNs()), port, clock);
        int32 = "int32".equals(type);
        deadlineNs = TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        capacity = (int)(shmBytes / Float.BYTES);
        // The trainer's tensors, in its (native) byte order.
        shared.order(ByteOrder.nativeOrder());
        if (int32)
        {
            sharedInts = shared.asIntBuffer();
            ints = new int[capacity];
        }
        else
        {
            sharedFloats = shared.asFloatBuffer();
            floats = new float[capacity];
        }
        return reply.put("ip", ipv4(localIp))
            .put("mac", EthernetHeader.formatMac(localMac))
            .put("switchIp", ipv4(target.ip()))
            .put("switchMac", EthernetHeader.formatMac(target.mac()))
            .put("elementType", type)
            .put("elementsPerPacket", settings.elementsPerPacket())
            .put("udpPort", udpPort)
            .put("elements", capacity);
    }

    @Override
    void connect(final JsonNode request)
    {
        if (worker == null)
        {
            throw new IllegalStateException("connect before open");
        }
        // nothing to connect: SwitchML workers send to the switch, which the controller named at open
    }

    @Override
    void checkCallRequest(final JsonNode request)
    {
        if (request.path("offset").asInt(0) != 0)
        {
            throw new IllegalArgumentException("allreduce: a call's values start at the shared memory's first byte " +
                "(offset 0)");
        }
    }

    @Override
    void beginCall(final long elements)
    {
        if (worker == null)
        {
            throw new IllegalStateException("allreduce before open");
        }
        if (failure != null)
        {
            throw new IllegalStateException("allreduce: this sidecar takes no call after a failed one (" + failure +
                "); open a new session");
        }
        if (elements <= 0 || elements > capacity)
        {
            throw new IllegalArgumentException("allreduce: " + elements + " elements do not fit the shared memory: " +
                "it holds " + capacity);
        }
        final int n = (int)elements;
        if (int32)
        {
            sharedInts.get(0, ints, 0, n);
            worker.begin(ints, n);
        }
        else
        {
            sharedFloats.get(0, floats, 0, n);
            worker.begin(floats, n); // refuses NaN, infinities, |x| >= 2^127 before sending (IllegalArgumentException)
        }
        callElements = n;
        lastResults = 0;
        lastProgressNs = clock.getAsLong();
        resultsCopied = false;
    }

    @Override
    int pollCall() throws CallFailedException
    {
        if (worker.isDone())
        {
            if (int32)
            {
                sharedInts.put(0, ints, 0, callElements);
            }
            else
            {
                sharedFloats.put(0, floats, 0, callElements);
            }
            resultsCopied = true;
            return 1;
        }
        final long now = clock.getAsLong();
        if (worker.resultsIn() != lastResults)
        {
            lastResults = worker.resultsIn();
            lastProgressNs = now;
        }
        else if (now - lastProgressNs > deadlineNs)
        {
            failure = "SwitchML call (job byte " + worker.jobByte() + "): no result for " +
                TimeUnit.NANOSECONDS.toMillis(deadlineNs) + " ms; " + lastResults + " of " + worker.packets() +
                " packets summed, " + worker.retransmissions() + " retransmissions";
            throw new CallFailedException(failure + " (a worker gone? the session's job removed from the " +
                "appliance?)");
        }
        return 0;
    }

    @Override
    boolean callDone()
    {
        return resultsCopied;
    }

    @Override
    void stats(final ObjectNode reply)
    {
        if (worker != null)
        {
            reply.put("framesSent", worker.framesSent())
                .put("retransmittedPackets", worker.retransmissions())
                .put("strayResults", worker.strayResults());
        }
    }

    static String ipv4(final int ip)
    {
        return (ip >>> 24) + "." + (ip >>> 16 & 0xFF) + "." + (ip >>> 8 & 0xFF) + "." + (ip & 0xFF);
    }
}
