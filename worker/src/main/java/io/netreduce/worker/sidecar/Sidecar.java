package io.netreduce.worker.sidecar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netreduce.host.allreduce.AllReduceException;
import io.netreduce.host.allreduce.NetReduceAllReduce;
import io.netreduce.host.allreduce.NetReduceConfig;
import io.netreduce.host.allreduce.RingLink;
import io.netreduce.host.rc.ConnectionInfo;
import io.netreduce.host.rc.RcEndpoint;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.wire.InaHeader;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.SystemNanoClock;

import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
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
 * input area; answered when the sum is in the output area or with the error), {@code stats}, {@code close}. One call runs at a time; requests queue in order.
 * Between calls the loop keeps the endpoint running, so neighbours' retransmissions are answered while this
 * trainer computes. It blocks in poll(2) on the port and the doorbell, so an idle sidecar takes no CPU.
 */
public final class Sidecar
{
    private final RcEndpoint endpoint;
    private final ControlChannel control;
    private final IdleStrategy idle;

    private RingLink link;
    private NetReduceAllReduce op;
    private NetReduceConfig opConfig;
    private ElementType elementType;
    private MappedByteBuffer shared;
    private int areaMessages;
    private FileChannel sharedFile;
    private long callStartNs;
    private boolean inCall;
    private boolean closing;
    private long calls;
    private long failedCalls;

    Sidecar(final RcEndpoint endpoint, final ControlChannel control, final IdleStrategy idle)
    {
        this.endpoint = endpoint;
        this.control = control;
        this.idle = idle;
    }

    /**
     * Serve until the trainer sends {@code close} or goes away.
     */
    void run() throws IOException
    {
        while (!closing)
        {
            int work = endpoint.doWork();
            if (inCall)
            {
                work += pollCall();
            }
            else
            {
                final String line = control.poll();
                if (line != null)
                {
                    handle(line);
                    work++;
                }
                else if (control.isClosed())
                {
                    break;
                }
            }
            idle.idle(work);
        }
        if (sharedFile != null)
        {
            sharedFile.close();
        }
    }

    private int pollCall() throws IOException
    {
        try
        {
            final int work = op.poll();
            if (op.isDone())
            {
                inCall = false;
                calls++;
                control.reply(Requests.ok()
                    .put("us", TimeUnit.NANOSECONDS.toMicros(System.nanoTime() - callStartNs)).toString());
            }
            return work;
        }
        catch (final AllReduceException ex)
        {
            inCall = false;
            failedCalls++;
            control.reply(Requests.error(ex.getMessage()));
            return 1;
        }
    }

    private void handle(final String line) throws IOException
    {
        final JsonNode request;
        try
        {
            request = Requests.parse(line);
            final String opName = request.get("op").textValue();
            switch (opName)
            {
                case "open" -> control.reply(open(request));
                case "connect" -> control.reply(connect(request));
                case "allreduce" -> beginCall(request);
                case "stats" -> control.reply(stats());
                case "close" ->
                {
                    closing = true;
                    control.reply(Requests.ok().toString());
                }
                default -> throw new IllegalArgumentException("unknown op '" + opName + "' (open, connect, " +
                    "allreduce, stats, close)");
            }
        }
        catch (final IllegalArgumentException | IllegalStateException ex)
        {
            control.reply(Requests.error(ex.getMessage()));
        }
        catch (final IOException ex)
        {
            // the shared memory file could not be opened or mapped: the trainer's mistake, not the sidecar's end
            control.reply(Requests.error("open: shared memory: " + ex.getMessage()));
        }
    }

    private String open(final JsonNode request) throws IOException
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
            tag("resultTag", Requests.textField(request, "resultTag", "NRES")));
        final long shmBytes = Requests.longField(request, "shmBytes", -1);
        final int messageBytes = config.messageBytes();
        final long messages = shmBytes / (2L * messageBytes);
        if (shmBytes > 0 && messages == 0)
        {
            throw new IllegalArgumentException("open: shmBytes " + shmBytes + " holds no message: the input and " +
                "output areas need at least 2 x MsgLen x payloadSize = " + 2L * messageBytes + " bytes");
        }
        mapShared(Path.of(Requests.textField(request, "shm", null)), shmBytes);
        final int areaBytes = (int)(messages * messageBytes);
        // The regions are the mapping itself (slices share its memory): the input area is what messages are sent
        // from, the output area what the predecessor's connection writes the sums into.
        link = new RingLink(endpoint, SystemNanoClock.INSTANCE, rank, world,
            endpoint.registerMemory(shared.slice(0, areaBytes)),
            endpoint.registerMemory(shared.slice(areaBytes, areaBytes)));
        areaMessages = (int)messages;
        opConfig = config;
        final ObjectNode reply = Requests.ok();
        reply.put("messages", areaMessages);
        reply.put("messageBytes", messageBytes);
        reply.put("input", 0);
        reply.put("output", areaBytes);
        reply.put("send", link.sendInfo().toLine());
        reply.put("receive", link.receiveInfo().toLine());
        reply.put("ip", endpoint.localIp().getHostAddress());
        reply.put("mac", ConnectionInfo.formatMac(endpoint.localMac()));
        return reply.toString();
    }

    private String connect(final JsonNode request)
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
        return Requests.ok().toString();
    }

    private void beginCall(final JsonNode request)
    {
        if (op == null)
        {
            throw new IllegalStateException("allreduce before connect");
        }
        if (request.has("offset"))
        {
            throw new IllegalArgumentException("allreduce: there is no \"offset\" any more: a call's data are " +
                "the input area's messages from the first on (see open's reply)");
        }
        final long elements = Requests.longField(request, "elements", -1);
        final long dataBytes = opConfig.dataBytesPerMessage();
        final long messages = elements > 0 ? (elements * elementType.size() + dataBytes - 1) / dataBytes : 0;
        if (elements <= 0 || messages > areaMessages)
        {
            throw new IllegalArgumentException("allreduce: " + elements + " " + elementType.cliName() +
                " elements do not fit the input area: it holds " + areaMessages + " messages of " + dataBytes +
                " data bytes (" + areaMessages * dataBytes / elementType.size() + " elements)");
        }
        callStartNs = System.nanoTime();
        op.beginPlaced((int)messages);
        inCall = true;
    }

    private String stats()
    {
        final ObjectNode reply = Requests.ok().put("calls", calls).put("failedCalls", failedCalls);
        if (op != null)
        {
            final var send = link.sendQp().counters();
            reply.put("bytesPosted", op.bytesPosted())
                .put("retransmittedPackets", send.retransmittedPackets())
                .put("timeouts", send.timeouts());
        }
        return reply.toString();
    }

    private void mapShared(final Path path, final long bytes) throws IOException
    {
        if (bytes <= 0 || bytes > Integer.MAX_VALUE)
        {
            throw new IllegalArgumentException("open: shmBytes must be 1.." + Integer.MAX_VALUE + ": " + bytes);
        }
        if (!Files.isRegularFile(path, LinkOption.NOFOLLOW_LINKS))
        {
            throw new IllegalArgumentException("open: shm " + path + " is not a regular file");
        }
        if (Files.size(path) < bytes)
        {
            throw new IllegalArgumentException("open: shm " + path + " holds " + Files.size(path) +
                " bytes, fewer than shmBytes " + bytes);
        }
        sharedFile = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE);
        shared = sharedFile.map(FileChannel.MapMode.READ_WRITE, 0, bytes);
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
