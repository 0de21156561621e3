package io.netreduce.worker;

import io.grpc.StatusRuntimeException;
import io.netreduce.switchml.controller.PacketSizeCode;
import io.netreduce.switchml.controller.SwitchMlControllerClient;
import io.netreduce.switchml.controller.UdpSessionReply;
import io.netreduce.switchml.controller.UncheckedSessionRefusedException;
import java.time.Duration;

import io.netreduce.host.allreduce.TensorPattern;
import io.netreduce.host.rc.ConnectionInfo;
import io.netreduce.host.switchml.SwitchMlWorker;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.AfPacketConfiguration;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.port.PortCounters;
import io.netreduce.protocol.port.PortPollIdleStrategy;
import io.netreduce.protocol.port.PortPoller;
import io.netreduce.protocol.wire.SwitchMlHeader;
import io.netreduce.protocol.writer.SwitchMlPacketWriter;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.YieldingIdleStrategy;

import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * {@code worker allreduce --protocol switchml}: one SwitchML worker ({@link SwitchMlWorker}) on an AF_PACKET port,
 * --iterations calls on rank --rank's input pattern ({@link TensorPattern}), each checked against the sum of every
 * rank's pattern ({@link ResultCheck}: int32 exact, fp32 within the block fixed point's bound) and reported as the
 * netreduce mode reports ({@link AllReduceReport}).
 * <p>
 * There is no bootstrap and no barrier between calls: the job on the appliance (installed beforehand, with this
 * worker's address) holds each slot until every worker has contributed, so a call's time includes waiting for the
 * slowest worker to start it. The first call's job byte is 0.
 */
final class SwitchMlRun
{
    /** The switch's addresses, as a worker sends to them. */
    record SwitchAddress(long mac, int ip)
    {
    }

    private final AllReduceOptions options;
    private final SwitchMlSettings settings;
    private final ElementType elementType;
    private final PrintStream out;
    private final OffEndpointThread checker;

    SwitchMlRun(
        final AllReduceOptions options, final SwitchMlSettings settings, final ElementType elementType,
        final PrintStream out, final OffEndpointThread checker)
    {
        this.options = options;
        this.settings = settings;
        this.elementType = elementType;
        this.out = out;
        this.checker = checker;
    }

    /**
     * Where the worker sends: --switch-mac and --switch-ip, or what the SwitchML controller answers when --controller
     * names it (the published client's set-up: a session id broadcast from rank 0, rank 0's UdpSession first, a
     * barrier after every rank's), with this worker's own addresses and the packet size.
     *
     * @throws IllegalStateException if the controller refuses the session (the reason is in its reply's trailer and
     *                               the appliance's log).
     */
    static SwitchAddress resolveSwitch(
        final SwitchMlSettings settings, final String controller, final int rank, final int world,
        final long localMac, final int localIp)
    {
        if (controller == null)
        {
            return new SwitchAddress(settings.switchMac(), settings.switchIp());
        }
        return register(controller, rank, world, localMac, localIp, settings.elements());
    }

    /**
     * Register with the SwitchML controller at {@code controller} (HOST:PORT, checked) as the published client does,
     * opening the session's job of {@code elements} per packet: blocks until every rank has registered.
     *
     * @return the switch's addresses.
     * @throws IllegalStateException if the controller refuses the session or cannot be reached.
     */
    static SwitchAddress register(
        final String controller, final int rank, final int world, final long localMac, final int localIp,
        final int elements)
    {
        final int colon = controller.lastIndexOf(':');
        final String host = controller.substring(0, colon);
        final int port = Integer.parseInt(controller.substring(colon + 1));
        try (SwitchMlControllerClient client = new SwitchMlControllerClient(host, port, Duration.ofSeconds(60)))
        {
            final UdpSessionReply reply =
                client.register(rank, world, localMac, localIp, PacketSizeCode.of(elements));
            return new SwitchAddress(reply.mac(), reply.ipv4());
        }
        catch (final UncheckedSessionRefusedException ex)
        {
            throw new IllegalStateException("the SwitchML controller at " + controller + " refused the session: " +
                ex.getMessage(), ex);
        }
        catch (final StatusRuntimeException ex)
        {
            throw new IllegalStateException("the SwitchML controller at " + controller + ": " + ex.getStatus(), ex);
        }
    }

    /**
     * @return the AF_PACKET port of a SwitchML worker sending {@code elements} per packet (transmit frames that hold
     *         its packets; no segmentation offload).
     */
    static AfPacketConfiguration portConfiguration(final String dev, final int elements)
    {
        final int frameLength = SwitchMlPacketWriter.frameLength(elements);
        return AfPacketConfiguration.defaults(dev)
            .withTxRing(Math.max(AfPacketConfiguration.DEFAULT_TX_FRAME_SIZE, 2 * Integer.highestOneBit(frameLength)),
                1024)
            .withSegmentationOffload(false);
    }

    /**
     * @return the exit status: 0 if every call's result passed its check, 1 if not, 2 if the port cannot carry the
     *         packets.
     */
    int run() throws IOException
    {
        final int frameLength = SwitchMlPacketWriter.frameLength(settings.elements());
        try (AfPacketPort port = AfPacketPort.open(portConfiguration(options.dev, settings.elements())))
        {
            if (frameLength > port.maxTxFrameLength())
            {
                System.err.println("allreduce: --elements " + settings.elements() + " makes frames of " + frameLength +
                    " bytes; " + options.dev + " (MTU " + port.mtu() + ") sends at most " + port.maxTxFrameLength());
                return 2;
            }
            final InetAddress local =
                options.ip != null ? InetAddress.getByName(options.ip) : AllReduceCommand.interfaceAddress(options.dev);
            if (!(local instanceof Inet4Address))
            {
                System.err.println("allreduce: SwitchML is IPv4 only; --ip " + options.ip + " is not IPv4");
                return 2;
            }
            final int localIp = ByteBuffer.wrap(local.getAddress()).getInt();
            final long localMac = ConnectionInfo.macFromBytes(port.macAddress());
            final SwitchAddress target;
            try
            {
                target = resolveSwitch(settings, options.controller, options.rank, options.world, localMac, localIp);
            }
            catch (final IllegalStateException ex)
            {
                System.err.println("allreduce: " + ex.getMessage());
                return 1;
            }
            final SwitchMlWorker worker = new SwitchMlWorker(new SwitchMlWorker.Config(localMac, localIp,
                settings.udpPort(), target.mac(), target.ip(), SwitchMlHeader.PORT_BASE, 0, options.world,
                settings.elements(), settings.outstanding(), settings.timeoutNs()), port, System::nanoTime);
            final boolean niceApplied = EndpointNice.apply(options.endpointNice, "allreduce", System.err);
            try (PortPoller poller = new PortPoller(List.of(port)))
            {
                final IdleStrategy idle =
                    "yield".equals(options.idleMode) ? new YieldingIdleStrategy() : new PortPollIdleStrategy(poller);
                return calls(worker, port, idle, niceApplied);
            }
        }
    }

    private int calls(
        final SwitchMlWorker worker, final AfPacketPort port, final IdleStrategy idle, final boolean niceApplied)
    {
        final int bytes = options.size;
        final int elements = bytes / Integer.BYTES;
        final int[] ints = settings.int32() ? new int[elements] : null;
        final float[] floats = settings.int32() ? null : new float[elements];
        final ResultCheck check = new ResultCheck(elementType, options.seed, options.world);
        final AllReduceReport report = new AllReduceReport(out, options, elementType, "switchml",
            settings.int32() ? "exact" : "within bound", bytes);
        final long deadlineNs = TimeUnit.SECONDS.toNanos(options.timeoutSeconds);
        final com.sun.management.OperatingSystemMXBean processCpu =
            (com.sun.management.OperatingSystemMXBean)ManagementFactory.getOperatingSystemMXBean();
        final ThreadMXBean threadCpu = ManagementFactory.getThreadMXBean();
        port.refreshKernelStatistics();
        final long rxDroppedBefore = port.counters().get(PortCounters.RX_DROPPED);
        final long wireBefore = port.counters().txBytes();
        final long framesBefore = worker.framesSent();
        for (int iteration = 0; iteration < options.iterations; iteration++)
        {
            final int it = iteration;
            checker.run(() -> fill(ints, floats, it));
            final long cpuStart = processCpu.getProcessCpuTime();
            final long threadCpuStart = threadCpu.getCurrentThreadCpuTime();
            final long start = System.nanoTime();
            try
            {
                if (ints != null)
                {
                    worker.allreduce(ints, deadlineNs, idle);
                }
                else
                {
                    worker.allreduce(floats, deadlineNs, idle);
                }
            }
            catch (final IllegalStateException ex)
            {
                report.failed(iteration, ex.getMessage());
                break;
            }
            final double seconds = (System.nanoTime() - start) / 1e9;
            report.called(start, seconds, (processCpu.getProcessCpuTime() - cpuStart) / 1e6,
                (threadCpu.getCurrentThreadCpuTime() - threadCpuStart) / 1e6);
            final String mismatch = checker.call(() -> ints != null ? check.checkSwitchMl(ints, it) :
                check.checkSwitchMl(floats, settings.elements(), it));
            report.checked(iteration, seconds, mismatch);
        }
        port.refreshKernelStatistics();
        return report.summariseSwitchMl(port, port.counters().txBytes() - wireBefore,
            worker.framesSent() - framesBefore, worker.retransmissions(), worker.strayResults(),
            port.counters().get(PortCounters.RX_DROPPED) - rxDroppedBefore, niceApplied);
    }

    /**
     * This rank's input of call {@code iteration}.
     */
    private void fill(final int[] ints, final float[] floats, final int iteration)
    {
        final int rank = options.rank;
        if (ints != null)
        {
            for (int i = 0; i < ints.length; i++)
            {
                ints[i] = TensorPattern.bits(ElementType.INT32, options.seed, rank, iteration, i);
            }
        }
        else
        {
            for (int i = 0; i < floats.length; i++)
            {
                floats[i] = Float.intBitsToFloat(TensorPattern.bits(ElementType.FP32, options.seed, rank, iteration, i));
            }
        }
    }
}
